//! `Sink`: how the Python side of a hosted graph answers the server. One sink per call
//! (a run, a state read, an update): Python puts stream parts into it as the graph yields
//! them, then one end (a JSON answer) or one failure; the Rust side reads them from a
//! channel.

use graphloom_core::{RunControl, StreamMode};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use serde_json::Value;
use tokio::sync::mpsc;

/// What the Python side said.
#[derive(Debug)]
pub(crate) enum Said {
    /// A stream part.
    Part {
        mode: StreamMode,
        ns: Vec<String>,
        data: Value,
    },
    /// The answer.
    End(Value),
    /// A failure: the exception's class name and its text.
    Fail { class: String, message: String },
}

/// The stream mode named `name`, as LangGraph names them.
fn mode(name: &str) -> PyResult<StreamMode> {
    Ok(match name {
        "values" => StreamMode::Values,
        "updates" => StreamMode::Updates,
        "custom" => StreamMode::Custom,
        "messages" => StreamMode::Messages,
        "tasks" => StreamMode::Tasks,
        "checkpoints" => StreamMode::Checkpoints,
        "debug" => StreamMode::Debug,
        "events" => StreamMode::Events,
        other => return Err(PyValueError::new_err(format!("unknown stream mode {other:?}"))),
    })
}

fn json(text: &str, what: &str) -> PyResult<Value> {
    serde_json::from_str(text).map_err(|e| PyValueError::new_err(format!("{what} is not JSON: {e}")))
}

/// Where one call's parts and answer go (see the module docs). Every method returns
/// whether the server still listens: `False` once the run was cancelled or its reader
/// went away, so the graph can stop.
#[pyclass(frozen, module = "graphloom._native")]
pub(crate) struct Sink {
    tx: mpsc::UnboundedSender<Said>,
    /// The run's drain control, when the server may ask it to drain.
    control: Option<RunControl>,
}

impl Sink {
    pub(crate) fn new() -> (Self, mpsc::UnboundedReceiver<Said>) {
        Self::with_control(None)
    }

    /// A sink whose [`draining`](Sink::draining) reads `control`.
    pub(crate) fn with_control(control: Option<RunControl>) -> (Self, mpsc::UnboundedReceiver<Said>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { tx, control }, rx)
    }
}

#[pymethods]
impl Sink {
    /// A part of stream mode `mode` from the subgraph at `ns` (empty for the graph itself),
    /// its data as JSON text.
    fn part(&self, mode_name: &str, ns: Vec<String>, data: &str) -> PyResult<bool> {
        let said = Said::Part {
            mode: mode(mode_name)?,
            ns,
            data: json(data, "a stream part")?,
        };
        Ok(self.tx.send(said).is_ok())
    }

    /// The call's answer, as JSON text.
    fn end(&self, data: &str) -> PyResult<bool> {
        Ok(self.tx.send(Said::End(json(data, "the answer")?)).is_ok())
    }

    /// The call failed with an exception of class `class`.
    fn fail(&self, class: String, message: String) -> bool {
        self.tx.send(Said::Fail { class, message }).is_ok()
    }

    /// Whether the server still listens.
    fn open(&self) -> bool {
        !self.tx.is_closed()
    }

    /// Whether the server asked the run to drain (stop at its next step boundary, its
    /// checkpoint saved): LangGraph's `RunControl` of the run reads it.
    fn draining(&self) -> bool {
        self.control.as_ref().is_some_and(RunControl::is_draining)
    }
}
