//! The example's field data ([`FIELD_JSON`], bundled from `data/field.json`: leases with
//! their boundaries, wells with surface locations, gas analyses, gathering connections and
//! daily flaring volumes) and what the domain tools compute from it.
//!
//! - **Spacing** ([`spacing`]): the distance from a well's surface location to the nearest
//!   line of its lease (the nearest point of the boundary polygon, measured with the
//!   haversine formula) and to the nearest other well completed in the same reservoir
//!   (haversine), against Statewide Rule 37's minimums of
//!   [`LEASE_LINE_MINIMUM_FT`] and [`BETWEEN_WELL_MINIMUM_FT`].
//! - **Offset wells** ([`offset_wells`]): the wells within a radius, nearest first, and the
//!   other operators among them (who must be notified of an exception).
//! - **Good cause** ([`good_cause`]): the arguments of a Rule 37 exception, written from the
//!   spacing shortfall, the well's geology note and the offset operators; none when the
//!   location is regular.
//! - **Form W-1** ([`w1_filing`]) and **Form R-32** ([`r32_filing`]) packages assembled
//!   from the above, with what is missing listed.
//! - **Gas analysis** ([`gas_analysis`]): heating value from the composition and the
//!   gathering system's specification and connection, hence pipeline readiness.

use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// The bundled field data (JSON).
pub const FIELD_JSON: &str = include_str!("../data/field.json");

/// Statewide Rule 37: minimum distance from a well to any lease line, feet.
pub const LEASE_LINE_MINIMUM_FT: f64 = 467.0;
/// Statewide Rule 37: minimum distance between wells on the same reservoir, feet.
pub const BETWEEN_WELL_MINIMUM_FT: f64 = 1200.0;
/// Default radius of the offset well search, feet (half a mile).
pub const OFFSET_RADIUS_FT: f64 = 2640.0;
/// Days a well may flare after completion before a Rule 32 exception is needed (our
/// figure: the seed gives none).
pub const FLARING_ALLOWED_DAYS: usize = 10;
/// Metric tons of CO2e per mcf of natural gas flared (EPA combustion factor, rounded).
pub const CO2E_TONNES_PER_MCF: f64 = 0.0551;

const EARTH_RADIUS_M: f64 = 6_371_008.8;
const FEET_PER_METRE: f64 = 1.0 / 0.3048;

/// Why a field computation could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldError {
    /// No well has this API number.
    #[error("no well with API number {0} in the field data")]
    UnknownWell(String),
    /// The well has no coordinates.
    #[error("well {0} has no surface_location coordinates")]
    NoLocation(String),
    /// The lease is unknown or has no boundary polygon.
    #[error("no boundary on file for lease {0}")]
    NoBoundary(String),
    /// The surface location is not inside the lease it is assigned to.
    #[error("the surface location of well {0} lies outside its lease boundary")]
    OutsideLease(String),
    /// No gas analysis is on file.
    #[error("well {0} has no gas analysis on file")]
    NoGasAnalysis(String),
    /// No flaring records are on file.
    #[error("well {0} has no flaring records on file")]
    NoFlaring(String),
    /// The bundled data does not parse.
    #[error("the bundled field data is invalid: {0}")]
    Data(String),
}

/// The field: leases and wells.
#[derive(Debug, Clone, Deserialize)]
pub struct Field {
    /// Leases.
    pub leases: Vec<Lease>,
    /// Wells.
    pub wells: Vec<Well>,
}

/// A lease.
#[derive(Debug, Clone, Deserialize)]
pub struct Lease {
    /// Entity id.
    pub id: String,
    /// Name.
    pub name: String,
    /// Operator.
    pub operator: String,
    /// County.
    pub county: String,
    /// Area, acres.
    pub acres: f64,
    /// Boundary polygon, `[latitude, longitude]` vertices in order.
    #[serde(default)]
    pub boundary: Vec<[f64; 2]>,
}

/// A well.
#[derive(Debug, Clone, Deserialize)]
pub struct Well {
    /// Entity id.
    pub id: String,
    /// Name.
    pub name: String,
    /// API number.
    pub api: String,
    /// Lease name.
    pub lease: String,
    /// Operator.
    pub operator: String,
    /// County.
    pub county: String,
    /// `proposed`, `producing`, `plugged`, ...
    pub status: String,
    /// Reservoir (field and formation).
    pub reservoir: String,
    /// `[latitude, longitude]`.
    #[serde(default)]
    pub surface_location: Option<[f64; 2]>,
    /// Why the location is where it is (the geologic reason of a good cause statement).
    #[serde(default)]
    pub geology: Option<String>,
    /// Latest gas analysis.
    #[serde(default)]
    pub gas_analysis: Option<GasAnalysis>,
    /// Gathering system the gas would go to.
    #[serde(default)]
    pub gathering: Option<Gathering>,
    /// Daily flared volumes.
    #[serde(default)]
    pub flaring: Option<Flaring>,
}

/// A gas analysis.
#[derive(Debug, Clone, Deserialize)]
pub struct GasAnalysis {
    /// Sample date.
    pub sampled: String,
    /// Mole percent by component (`methane`, `ethane`, `propane`, `butanes`,
    /// `pentanes_plus`, `nitrogen`, `co2`).
    pub mol_pct: BTreeMap<String, f64>,
    /// Hydrogen sulphide, ppm.
    pub h2s_ppm: f64,
}

/// A gathering system connection.
#[derive(Debug, Clone, Deserialize)]
pub struct Gathering {
    /// System name.
    pub system: String,
    /// Whether the well is connected.
    pub connected: bool,
    /// When a connection is expected, if not connected.
    #[serde(default)]
    pub expected_connection: Option<String>,
    /// Capacity available to the well, mcf per day.
    pub capacity_mcfd: f64,
    /// The system's quality specification.
    pub spec: PipelineSpec,
}

/// A pipeline quality specification.
#[derive(Debug, Clone, Deserialize)]
pub struct PipelineSpec {
    /// Most CO2, mole percent.
    pub max_co2_pct: f64,
    /// Most nitrogen, mole percent.
    pub max_nitrogen_pct: f64,
    /// Most H2S, ppm.
    pub max_h2s_ppm: f64,
    /// Least gross heating value, BTU/scf.
    pub min_btu_per_scf: f64,
    /// Most gross heating value, BTU/scf.
    pub max_btu_per_scf: f64,
}

/// Daily flared volumes since a date.
#[derive(Debug, Clone, Deserialize)]
pub struct Flaring {
    /// First day of flaring.
    pub since: String,
    /// Volume flared each day, mcf.
    pub daily_mcf: Vec<f64>,
}

/// The bundled field.
///
/// # Errors
/// [`FieldError::Data`] when the bundled JSON does not parse (a build of bad data).
pub fn field() -> Result<&'static Field, FieldError> {
    static FIELD: OnceLock<Result<Field, String>> = OnceLock::new();
    FIELD
        .get_or_init(|| serde_json::from_str(FIELD_JSON).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| FieldError::Data(e.clone()))
}

/// The leases and wells as knowledge-graph entities (the JSON records).
#[must_use]
pub fn entities() -> Vec<Value> {
    let Ok(v) = serde_json::from_str::<Value>(FIELD_JSON) else {
        return Vec::new();
    };
    ["wells", "leases"]
        .iter()
        .filter_map(|k| v[*k].as_array())
        .flatten()
        .cloned()
        .collect()
}

impl Field {
    /// A well by API number.
    ///
    /// # Errors
    /// [`FieldError::UnknownWell`].
    pub fn well(&self, api: &str) -> Result<&Well, FieldError> {
        let api = api.trim();
        self.wells
            .iter()
            .find(|w| w.api == api)
            .ok_or_else(|| FieldError::UnknownWell(api.to_owned()))
    }

    /// A well's lease, with a boundary.
    ///
    /// # Errors
    /// [`FieldError::NoBoundary`].
    pub fn lease_of(&self, w: &Well) -> Result<&Lease, FieldError> {
        self.leases
            .iter()
            .find(|l| l.name == w.lease && l.boundary.len() >= 3)
            .ok_or_else(|| FieldError::NoBoundary(w.lease.clone()))
    }
}

impl Well {
    /// The surface location.
    ///
    /// # Errors
    /// [`FieldError::NoLocation`].
    pub fn location(&self) -> Result<[f64; 2], FieldError> {
        self.surface_location
            .ok_or_else(|| FieldError::NoLocation(self.api.clone()))
    }
}

/// Great-circle distance between two `[latitude, longitude]` points, feet (haversine).
#[must_use]
pub fn haversine_ft(a: [f64; 2], b: [f64; 2]) -> f64 {
    let (la1, la2) = (a[0].to_radians(), b[0].to_radians());
    let dlat = la2 - la1;
    let dlon = (b[1] - a[1]).to_radians();
    let h = (dlat / 2.0).sin().powi(2) + la1.cos() * la2.cos() * (dlon / 2.0).sin().powi(2);
    2.0 * EARTH_RADIUS_M * h.sqrt().min(1.0).asin() * FEET_PER_METRE
}

/// The nearest point of a boundary to a location.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LineDistance {
    /// Distance, feet (haversine from the location to the nearest boundary point).
    pub feet: f64,
    /// Which side of the location the line is on: `north`, `south`, `east`, `west`.
    pub direction: &'static str,
}

/// The distance from `p` to the nearest point of the closed polygon `boundary`. The nearest
/// point of each edge is found in a local flat projection around `p` (exact enough over a
/// lease), and its distance measured with [`haversine_ft`]. `None` for fewer than three
/// vertices.
#[must_use]
pub fn distance_to_boundary(p: [f64; 2], boundary: &[[f64; 2]]) -> Option<LineDistance> {
    if boundary.len() < 3 {
        return None;
    }
    let cos_lat = p[0].to_radians().cos();
    // Degrees to a flat (east, north) plane around p, in degrees of latitude.
    let to_plane = |q: [f64; 2]| ((q[1] - p[1]) * cos_lat, q[0] - p[0]);
    let mut best: Option<(f64, (f64, f64))> = None;
    for (i, a) in boundary.iter().enumerate() {
        let b = boundary[(i + 1) % boundary.len()];
        let (ax, ay) = to_plane(*a);
        let (bx, by) = to_plane(b);
        let (dx, dy) = (bx - ax, by - ay);
        let len2 = dx * dx + dy * dy;
        let t = if len2 > 0.0 {
            (-(ax * dx + ay * dy) / len2).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let q = (ax + t * dx, ay + t * dy);
        let d2 = q.0 * q.0 + q.1 * q.1;
        if best.is_none_or(|(b2, _)| d2 < b2) {
            best = Some((d2, q));
        }
    }
    let (_, (qx, qy)) = best?;
    let nearest = [p[0] + qy, p[1] + qx / cos_lat];
    let direction = if qx.abs() > qy.abs() {
        if qx < 0.0 {
            "west"
        } else {
            "east"
        }
    } else if qy < 0.0 {
        "south"
    } else {
        "north"
    };
    Some(LineDistance {
        feet: haversine_ft(p, nearest),
        direction,
    })
}

/// Whether `p` lies inside the polygon `boundary` (ray casting).
#[must_use]
pub fn inside(p: [f64; 2], boundary: &[[f64; 2]]) -> bool {
    let mut inside = false;
    let n = boundary.len();
    for i in 0..n {
        let a = boundary[i];
        let b = boundary[(i + n - 1) % n];
        if (a[0] > p[0]) != (b[0] > p[0]) {
            let lon_at = a[1] + (p[0] - a[0]) / (b[0] - a[0]) * (b[1] - a[1]);
            if p[1] < lon_at {
                inside = !inside;
            }
        }
    }
    inside
}

fn feet(x: f64) -> f64 {
    x.round()
}

fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The Rule 37 spacing assessment of the well with API number `api`, computed from its
/// surface location, its lease boundary and the other wells of its reservoir.
///
/// # Errors
/// An unknown well, a well without coordinates, a lease without a boundary, a location
/// outside its lease.
pub fn spacing(api: &str) -> Result<Value, FieldError> {
    let f = field()?;
    let w = f.well(api)?;
    let loc = w.location()?;
    let lease = f.lease_of(w)?;
    if !inside(loc, &lease.boundary) {
        return Err(FieldError::OutsideLease(w.api.clone()));
    }
    let line = distance_to_boundary(loc, &lease.boundary)
        .ok_or_else(|| FieldError::NoBoundary(lease.name.clone()))?;
    let nearest = f
        .wells
        .iter()
        .filter(|o| o.api != w.api && o.reservoir == w.reservoir && o.status != "plugged")
        .filter_map(|o| o.surface_location.map(|l| (o, haversine_ft(loc, l))))
        .min_by(|a, b| a.1.total_cmp(&b.1));
    let lease_ok = line.feet >= LEASE_LINE_MINIMUM_FT;
    let well_ok = nearest.is_none_or(|(_, d)| d >= BETWEEN_WELL_MINIMUM_FT);
    Ok(json!({
        "well_api": w.api,
        "well_name": w.name,
        "lease": lease.name,
        "reservoir": w.reservoir,
        "surface_location": loc,
        "lease_line_distance_ft": feet(line.feet),
        "nearest_lease_line": line.direction,
        "lease_line_minimum_ft": LEASE_LINE_MINIMUM_FT,
        "nearest_well": nearest.map(|(o, _)| json!({"api": o.api, "name": o.name, "operator": o.operator})),
        "nearest_well_distance_ft": nearest.map(|(_, d)| feet(d)),
        "between_well_minimum_ft": BETWEEN_WELL_MINIMUM_FT,
        "lease_line_ok": lease_ok,
        "between_well_ok": well_ok,
        "exception_required": !(lease_ok && well_ok),
    }))
}

/// The wells within `radius_ft` of the well `api`, nearest first, and the operators among
/// them other than the well's own (the offset operators to notify of an exception).
///
/// # Errors
/// An unknown well or one without coordinates.
pub fn offset_wells(api: &str, radius_ft: f64) -> Result<Value, FieldError> {
    let f = field()?;
    let w = f.well(api)?;
    let loc = w.location()?;
    let mut near: Vec<(&Well, f64)> = f
        .wells
        .iter()
        .filter(|o| o.api != w.api)
        .filter_map(|o| o.surface_location.map(|l| (o, haversine_ft(loc, l))))
        .filter(|(_, d)| *d <= radius_ft)
        .collect();
    near.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut operators: Vec<&str> = Vec::new();
    for (o, _) in &near {
        if o.operator != w.operator && !operators.contains(&o.operator.as_str()) {
            operators.push(&o.operator);
        }
    }
    Ok(json!({
        "well_api": w.api,
        "radius_ft": radius_ft,
        "offsets": near.iter().map(|(o, d)| json!({
            "api": o.api, "name": o.name, "operator": o.operator, "lease": o.lease,
            "reservoir": o.reservoir, "status": o.status, "distance_ft": feet(*d),
            "same_reservoir": o.reservoir == w.reservoir,
        })).collect::<Vec<_>>(),
        "offset_operators": operators,
    }))
}

/// The good cause arguments of a Rule 37 exception for the well `api`: the geologic reason
/// (the well's geology note), waste and confiscation (from the spacing shortfall) and
/// correlative rights (the offset operators within [`OFFSET_RADIUS_FT`]). A regular
/// location needs none: `exception_required: false` and no arguments.
///
/// # Errors
/// As [`spacing`].
pub fn good_cause(api: &str) -> Result<Value, FieldError> {
    let f = field()?;
    let w = f.well(api)?;
    let sp = spacing(api)?;
    let offsets = offset_wells(api, OFFSET_RADIUS_FT)?;
    if sp["exception_required"] == false {
        return Ok(json!({
            "well_api": w.api,
            "exception_required": false,
            "arguments": [],
            "narrative": format!("{} is at a regular location under Statewide Rule 37; no good cause statement is needed.", w.name),
            "missing": [],
        }));
    }
    let lease = f.lease_of(w)?;
    let mut missing = Vec::new();
    let geology = match &w.geology {
        Some(g) => format!("The location of {} is set by geology: {g}.", w.name),
        None => {
            missing.push("a geologic reason for the location");
            format!("No geologic reason for the location of {} is on file.", w.name)
        }
    };
    let mut shortfalls = Vec::new();
    let line_ft = sp["lease_line_distance_ft"].as_f64().unwrap_or_default();
    if sp["lease_line_ok"] == false {
        shortfalls.push(format!(
            "{} ft from the {} line of the {}-acre {} ({} ft required)",
            thousands(line_ft),
            sp["nearest_lease_line"].as_str().unwrap_or("nearest"),
            thousands(lease.acres),
            lease.name,
            thousands(LEASE_LINE_MINIMUM_FT)
        ));
    }
    if sp["between_well_ok"] == false {
        shortfalls.push(format!(
            "{} ft from {} on the same reservoir ({} ft required)",
            thousands(sp["nearest_well_distance_ft"].as_f64().unwrap_or_default()),
            sp["nearest_well"]["name"].as_str().unwrap_or("the nearest well"),
            thousands(BETWEEN_WELL_MINIMUM_FT)
        ));
    }
    let waste = format!(
        "The proposed location is {}. A regular location would leave the {} reservoir under that \
         part of the tract undrained by any well: the exception prevents waste and protects the \
         mineral owners of the {} from confiscation of their share.",
        shortfalls.join(" and "),
        w.reservoir,
        lease.name
    );
    let offset_ops: Vec<String> = offsets["offset_operators"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let correlative = if offset_ops.is_empty() {
        format!(
            "No other operator has a well within {} ft; no offset operator's correlative rights are affected.",
            thousands(OFFSET_RADIUS_FT)
        )
    } else {
        let named: Vec<String> = offset_ops
            .iter()
            .map(|op| {
                let wells: Vec<String> = offsets["offsets"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|o| o["operator"] == op.as_str())
                    .map(|o| {
                        format!(
                            "{}, {} ft",
                            o["name"].as_str().unwrap_or("?"),
                            thousands(o["distance_ft"].as_f64().unwrap_or_default())
                        )
                    })
                    .collect();
                format!("{op} ({})", wells.join("; "))
            })
            .collect();
        format!(
            "Offset operators within {} ft are notified and keep their fair chance to produce \
             their share: {}.",
            thousands(OFFSET_RADIUS_FT),
            named.join(", ")
        )
    };
    let arguments = vec![
        json!({"argument": "geology", "text": &geology}),
        json!({"argument": "waste_and_confiscation", "text": &waste}),
        json!({"argument": "correlative_rights", "text": &correlative}),
    ];
    let narrative = [geology, waste, correlative].join("\n\n");
    Ok(json!({
        "well_api": w.api,
        "exception_required": true,
        "arguments": arguments,
        "narrative": narrative,
        "offset_operators": offset_ops,
        "missing": missing,
    }))
}

/// The Form W-1 package of the well `api`: well and lease, the spacing assessment, and,
/// when an exception is needed, the good cause statement and the offset operators to
/// notify. `status` is `complete` unless something is `missing`.
///
/// # Errors
/// As [`spacing`].
pub fn w1_filing(api: &str) -> Result<Value, FieldError> {
    let f = field()?;
    let w = f.well(api)?;
    let lease = f.lease_of(w)?;
    let sp = spacing(api)?;
    let exception = sp["exception_required"] == true;
    let mut attachments = vec!["plat of the lease with the surface location"];
    let mut missing: Vec<Value> = Vec::new();
    let (cause, notify) = if exception {
        let gc = good_cause(api)?;
        attachments.push("good cause statement");
        let notify = gc["offset_operators"].clone();
        if notify.as_array().is_some_and(|a| !a.is_empty()) {
            attachments.push("list of offset operators notified");
        }
        missing.extend(gc["missing"].as_array().cloned().unwrap_or_default());
        (gc["narrative"].clone(), notify)
    } else {
        (Value::Null, json!([]))
    };
    Ok(json!({
        "form": "W-1",
        "status": if missing.is_empty() { "complete" } else { "incomplete" },
        "well": {"api": w.api, "name": w.name, "operator": w.operator, "county": w.county,
                 "reservoir": w.reservoir, "surface_location": w.surface_location},
        "lease": {"name": lease.name, "acres": lease.acres},
        "spacing": sp,
        "rule37_exception_requested": exception,
        "good_cause_statement": cause,
        "offset_operators_to_notify": notify,
        "attachments": attachments,
        "missing": missing,
    }))
}

/// Gross heating value of a composition in mole percent, BTU/scf (ideal gross heating
/// values per component; inerts count zero; normalised to 100 %).
#[must_use]
pub fn heating_value(mol_pct: &BTreeMap<String, f64>) -> f64 {
    let btu = |c: &str| match c {
        "methane" => 1010.0,
        "ethane" => 1769.7,
        "propane" => 2516.1,
        "butanes" => 3262.3,
        "pentanes_plus" => 4008.9,
        _ => 0.0,
    };
    let total: f64 = mol_pct.values().sum();
    if total <= 0.0 {
        return 0.0;
    }
    mol_pct.iter().map(|(c, x)| btu(c) * x).sum::<f64>() / total
}

/// The gas analysis of the well `api` against its gathering system: heating value, the
/// specification's limits, the connection and its capacity against the current flaring
/// rate; `pipeline_ready` when everything passes, `reasons` otherwise.
///
/// # Errors
/// An unknown well, or one without a gas analysis or gathering record.
pub fn gas_analysis(api: &str) -> Result<Value, FieldError> {
    let f = field()?;
    let w = f.well(api)?;
    let (Some(ga), Some(g)) = (&w.gas_analysis, &w.gathering) else {
        return Err(FieldError::NoGasAnalysis(w.api.clone()));
    };
    let pct = |c: &str| ga.mol_pct.get(c).copied().unwrap_or(0.0);
    let btu = heating_value(&ga.mol_pct);
    let mut reasons = Vec::new();
    if pct("co2") > g.spec.max_co2_pct {
        reasons.push(format!(
            "CO2 {}% is above the {}% specification",
            pct("co2"),
            g.spec.max_co2_pct
        ));
    }
    if pct("nitrogen") > g.spec.max_nitrogen_pct {
        reasons.push(format!(
            "nitrogen {}% is above the {}% specification",
            pct("nitrogen"),
            g.spec.max_nitrogen_pct
        ));
    }
    if ga.h2s_ppm > g.spec.max_h2s_ppm {
        reasons.push(format!(
            "H2S {} ppm is above the {} ppm specification",
            ga.h2s_ppm, g.spec.max_h2s_ppm
        ));
    }
    if btu < g.spec.min_btu_per_scf || btu > g.spec.max_btu_per_scf {
        reasons.push(format!(
            "heating value {btu:.0} BTU/scf is outside {}-{} BTU/scf",
            g.spec.min_btu_per_scf, g.spec.max_btu_per_scf
        ));
    }
    let meets_spec = reasons.is_empty();
    if !g.connected {
        reasons.push(match &g.expected_connection {
            Some(d) => format!("not connected to {} (connection expected {d})", g.system),
            None => format!("not connected to {}", g.system),
        });
    }
    let rate = w.flaring.as_ref().and_then(|fl| fl.daily_mcf.last().copied());
    if let Some(rate) = rate.filter(|r| g.connected && *r > g.capacity_mcfd) {
        reasons.push(format!(
            "{} has {} mcf/d of capacity for {rate} mcf/d",
            g.system, g.capacity_mcfd
        ));
    }
    Ok(json!({
        "well_api": w.api,
        "sampled": ga.sampled,
        "heating_value_btu_per_scf": (btu * 10.0).round() / 10.0,
        "co2_pct": pct("co2"),
        "nitrogen_pct": pct("nitrogen"),
        "h2s_ppm": ga.h2s_ppm,
        "gathering_system": g.system,
        "connected": g.connected,
        "meets_spec": meets_spec,
        "pipeline_ready": reasons.is_empty(),
        "reasons": reasons,
    }))
}

/// The flaring record of the well `api`, summed: since when, days flared, total, average
/// and peak daily volumes, the volume beyond the [`FLARING_ALLOWED_DAYS`] allowed, whether
/// it flared longer than allowed, and its CO2e emissions
/// ([`CO2E_TONNES_PER_MCF`] per mcf flared).
///
/// # Errors
/// An unknown well, or one without flaring records.
pub fn flaring(api: &str) -> Result<Value, FieldError> {
    let f = field()?;
    let w = f.well(api)?;
    let fl = w
        .flaring
        .as_ref()
        .filter(|fl| !fl.daily_mcf.is_empty())
        .ok_or_else(|| FieldError::NoFlaring(w.api.clone()))?;
    let days = fl.daily_mcf.len();
    let total: f64 = fl.daily_mcf.iter().sum();
    let beyond: f64 = fl.daily_mcf.iter().skip(FLARING_ALLOWED_DAYS).sum();
    let peak = fl.daily_mcf.iter().copied().fold(0.0, f64::max);
    Ok(json!({
        "well_api": w.api,
        "since": fl.since,
        "days": days,
        "total_mcf": total,
        "average_mcfd": (total / days as f64 * 10.0).round() / 10.0,
        "peak_mcfd": peak,
        "allowed_days": FLARING_ALLOWED_DAYS,
        "mcf_beyond_allowed_days": beyond,
        "beyond_allowed_days": days > FLARING_ALLOWED_DAYS,
        "co2e_tonnes": (total * CO2E_TONNES_PER_MCF * 10.0).round() / 10.0,
    }))
}

/// The Form R-32 package of the well `api`: the flaring record ([`flaring`]), CO2e
/// emissions, the gas analysis and pipeline readiness, and whether an exception is needed
/// (flaring beyond the allowed days while the gas cannot go to a pipeline).
///
/// # Errors
/// An unknown well, or one without flaring records.
pub fn r32_filing(api: &str) -> Result<Value, FieldError> {
    let mut flaring = flaring(api)?;
    let f = field()?;
    let w = f.well(api)?;
    let co2e = flaring.get("co2e_tonnes").cloned().unwrap_or(Value::Null);
    let beyond = flaring.get("beyond_allowed_days") == Some(&Value::Bool(true));
    if let Some(o) = flaring.as_object_mut() {
        for k in ["well_api", "co2e_tonnes", "beyond_allowed_days"] {
            o.remove(k);
        }
    }
    let gas = gas_analysis(api).ok();
    let ready = gas.as_ref().is_some_and(|g| g["pipeline_ready"] == true);
    let mut missing = Vec::new();
    if gas.is_none() {
        missing.push("gas analysis and gathering record");
    }
    Ok(json!({
        "form": "R-32",
        "status": if missing.is_empty() { "complete" } else { "incomplete" },
        "well": {"api": w.api, "name": w.name, "operator": w.operator, "county": w.county, "lease": w.lease},
        "flaring": flaring,
        "co2e_tonnes": co2e,
        "gas_analysis": gas,
        "exception_required": beyond && !ready,
        "requested_until": w.gathering.as_ref().and_then(|g| g.expected_connection.clone()),
        "missing": missing,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn haversine_matches_a_known_distance() {
        // One minute of latitude is one nautical mile (6,076 ft) to within a few feet.
        let d = haversine_ft([32.0, -102.0], [32.0 + 1.0 / 60.0, -102.0]);
        assert!((d - 6076.0).abs() < 10.0, "{d}");
    }

    #[test]
    fn the_boundary_distance_is_to_the_nearest_edge() {
        let square = [[0.0, 0.0], [0.0, 0.01], [0.01, 0.01], [0.01, 0.0]];
        let p = [0.005, 0.001];
        let d = distance_to_boundary(p, &square).unwrap();
        assert_eq!(d.direction, "west");
        assert!((d.feet - haversine_ft(p, [0.005, 0.0])).abs() < 0.5, "{d:?}");
        assert!(inside(p, &square));
        assert!(!inside([0.02, 0.005], &square));
    }
}
