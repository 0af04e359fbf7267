//! The skills and tools of the example: root skills per agent type (persona, exposed tools,
//! `require_hitl` rules), skills the model can select with `SKILL_SELECT:{id}` (tier 2
//! definition, tier 3 artifacts), core capabilities, and the mutating `create_entity`.

use crate::field::{self, FieldError};
use graphloom_core::store::{DynStore, PutOptions, SearchQuery};
use graphloom_prebuilt::{FnTool, Tool, ToolError, ToolRuntime};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Tools offered to every agent whatever skills are loaded.
pub const CORE_TOOLS: [&str; 2] = ["entity_resolve", "context_assemble"];

/// Mutating capabilities the `before_tool_call` gate holds for approval (tool -> capability).
pub const MUTATING_TOOLS: [(&str, &str); 3] = [
    ("create_entity", "create_entity"),
    ("update_entity", "update_entity"),
    ("link_entities", "link_entities"),
];

/// The store namespace of knowledge-graph entities.
pub fn entities_ns() -> Vec<String> {
    vec!["kg".into(), "entities".into()]
}

/// The capability key of a mutating tool, `None` for read-only tools.
#[must_use]
pub fn mutating_capability(tool: &str) -> Option<&'static str> {
    MUTATING_TOOLS.iter().find(|(t, _)| *t == tool).map(|(_, c)| *c)
}

/// A skill: a definition (tier 2), optional artifacts (tier 3), the tools it exposes and
/// its `require_hitl` rules (`after_tool_call` on a tool -> checkpoint type).
#[derive(Debug, Clone)]
pub struct Skill {
    /// Id (`SKILL_SELECT:{id}`).
    pub id: &'static str,
    /// Display name.
    pub name: &'static str,
    /// Persona, for root skills.
    pub persona: Option<&'static str>,
    /// Description.
    pub description: &'static str,
    /// Steps.
    pub steps: &'static [&'static str],
    /// Requirements.
    pub requirements: &'static [&'static str],
    /// Output format.
    pub output_format: &'static str,
    /// Reference documents (tier 3).
    pub artifacts: &'static [&'static str],
    /// Domain facts a root skill injects as their own system message.
    pub context_templates: &'static [&'static str],
    /// Tools the skill makes visible to the model.
    pub tools: &'static [&'static str],
    /// `require_hitl` rules: after this tool ran, pause at this checkpoint type.
    pub hitl_rules: &'static [(&'static str, &'static str)],
}

const RRC_RULE37: Skill = Skill {
    id: "rrc_rule37",
    name: "RRC Rule 37 Spacing Exceptions",
    persona: Some("You are a Texas Railroad Commission permitting specialist who prepares Rule 37 spacing exception filings precisely and conservatively."),
    description: "Root skill of Rule 37 agents.",
    steps: &[],
    requirements: &[],
    output_format: "",
    artifacts: &[],
    context_templates: &["Statewide Rule 37 (16 TAC 3.37): wells keep 467 ft from lease lines and 1,200 ft from other wells on the same reservoir unless an exception is granted."],
    tools: &["offset_well_analysis", "rule37_filing_assembly", "good_cause_narrative", "create_entity"],
    hitl_rules: &[("rule37_filing_assembly", "pre_filing"), ("good_cause_narrative", "good_cause_review")],
};

const RRC_RULE32: Skill = Skill {
    id: "rrc_rule32",
    name: "RRC Rule 32 Flaring Exceptions",
    persona: Some("You are a Texas Railroad Commission specialist for Rule 32 gas flaring and venting exceptions."),
    description: "Root skill of Rule 32 agents.",
    steps: &[],
    requirements: &[],
    output_format: "",
    artifacts: &[],
    context_templates: &["Statewide Rule 32 (16 TAC 3.32): flaring beyond the allowed period needs an exception backed by volumes and pipeline readiness."],
    tools: &["gas_analysis", "rule32_filing_assembly", "flaring_volume_calc", "emissions_estimate"],
    hitl_rules: &[("rule32_filing_assembly", "pre_filing")],
};

const RULE37_SPACING: Skill = Skill {
    id: "rule37_spacing",
    name: "Spacing Calculation",
    persona: None,
    description: "Calculates the distance from a proposed well to the nearest lease line and to the nearest well on the same reservoir, and decides whether a Rule 37 exception is needed.",
    steps: &[
        "Retrieve the subject well location.",
        "Identify the lease boundaries and the nearest lease line.",
        "Find the nearest well completed in the same reservoir.",
        "Run spacing_assessment and compare with the statewide minimums.",
    ],
    requirements: &["Well must have surface_location coordinates.", "Lease boundary must be on file."],
    output_format: "Spacing Summary:\n- Distance to nearest lease line: X ft\n- Distance to nearest well: Y ft\n- Exception required: yes/no",
    artifacts: &["16 TAC 3.37(a)(1): minimum 467 ft to any property, lease or subdivision line; 1,200 ft between wells on the same lease and reservoir."],
    context_templates: &[],
    tools: &["spacing_assessment"],
    hitl_rules: &[],
};

const GOOD_CAUSE: Skill = Skill {
    id: "good_cause",
    name: "Good Cause Justification",
    persona: None,
    description: "Writes the good cause argument of a Rule 37 exception: confiscation, waste prevention, correlative rights.",
    steps: &["State the geologic reason.", "Show the exception prevents waste or confiscation.", "Address offset operators."],
    requirements: &["Offset well analysis done."],
    output_format: "Good Cause Statement: one paragraph per argument.",
    artifacts: &[],
    context_templates: &[],
    tools: &["good_cause_narrative"],
    hitl_rules: &[],
};

/// Every skill of the catalog.
#[must_use]
pub fn catalog() -> Vec<Skill> {
    vec![RRC_RULE37, RRC_RULE32, RULE37_SPACING, GOOD_CAUSE]
}

/// A skill by id.
#[must_use]
pub fn skill(id: &str) -> Option<Skill> {
    catalog().into_iter().find(|s| s.id == id)
}

/// The root skill of an agent type (`None`: a general agent, which loads no skill).
#[must_use]
pub fn root_skill(agent_type: &str) -> Option<Skill> {
    match agent_type {
        "rule_37" => skill("rrc_rule37"),
        "rule_32" => skill("rrc_rule32"),
        _ => None,
    }
}

/// Per-agent budget defaults: (max tokens, max cost in USD).
#[must_use]
pub fn agent_budget(agent_type: &str) -> (u64, f64) {
    match agent_type {
        "rule_37" => (150_000, 10.0),
        "rule_32" => (100_000, 8.0),
        "compliance_monitor" => (200_000, 15.0),
        "flaring_monitor" => (300_000, 20.0),
        _ => (crate::DEFAULT_MAX_TOKENS, crate::DEFAULT_MAX_COST_USD),
    }
}

/// The tools visible to the model: core capabilities, then the root skill's and the
/// injected skills' tools, deduplicated by name.
#[must_use]
pub fn visible_tools(agent_type: &str, injected: &[String]) -> Vec<String> {
    let mut names: Vec<String> = CORE_TOOLS.iter().map(|s| (*s).to_owned()).collect();
    let skills = root_skill(agent_type)
        .into_iter()
        .chain(injected.iter().filter_map(|id| skill(id)));
    for s in skills {
        for t in s.tools {
            if !names.iter().any(|n| n == t) {
                names.push((*t).to_owned());
            }
        }
    }
    names
}

/// The `require_hitl` checkpoint a loaded skill attaches to `tool`, if any.
#[must_use]
pub fn hitl_rule_for(agent_type: &str, injected: &[String], tool: &str) -> Option<&'static str> {
    root_skill(agent_type)
        .into_iter()
        .chain(injected.iter().filter_map(|id| skill(id)))
        .flat_map(|s| s.hitl_rules.iter().copied())
        .find(|(t, _)| *t == tool)
        .map(|(_, c)| c)
}

/// The system message of an injected skill (tier 2, tier 3 when it has artifacts, and the
/// entity context).
#[must_use]
pub fn render_skill(s: &Skill, entity_context: Option<&str>) -> String {
    let mut out = format!(
        "=== Skill Activated: {} ===\n## Description\n{}\n",
        s.name, s.description
    );
    if !s.steps.is_empty() {
        out.push_str("## Steps\n");
        for (i, step) in s.steps.iter().enumerate() {
            out.push_str(&format!("{}. {step}\n", i + 1));
        }
    }
    if !s.requirements.is_empty() {
        out.push_str("## Requirements\n");
        for r in s.requirements {
            out.push_str(&format!("- {r}\n"));
        }
    }
    if !s.output_format.is_empty() {
        out.push_str(&format!("## Output Format\n{}\n", s.output_format));
    }
    if !s.artifacts.is_empty() {
        out.push_str("## Reference Artifacts\n");
        for a in s.artifacts {
            out.push_str(&format!("- {a}\n"));
        }
    }
    if let Some(ctx) = entity_context {
        out.push_str(&format!("## Entity Context\n{ctx}\n"));
    }
    out
}

/// The built-in registry the resolver falls back to: the wells and leases of the bundled
/// field data ([`crate::field`]).
fn registry() -> Vec<Value> {
    crate::field::entities()
}

async fn all_entities(store: Option<&Arc<dyn DynStore>>) -> Vec<Value> {
    let mut out = registry();
    if let Some(store) = store {
        if let Ok(items) = store.search(&entities_ns(), SearchQuery::new().limit(1000)).await {
            out.extend(items.into_iter().map(|i| i.item.value));
        }
    }
    out
}

/// An entity by id, from the store's knowledge graph or the built-in registry.
pub async fn find_entity(store: Option<&Arc<dyn DynStore>>, id: &str) -> Option<Value> {
    all_entities(store).await.into_iter().find(|e| e["id"] == id)
}

fn matches(entity: &Value, query: &str) -> bool {
    let q = query.trim().to_lowercase();
    ["name", "api", "id", "external_id"].iter().any(|k| {
        entity[*k]
            .as_str()
            .is_some_and(|v| v.to_lowercase() == q || (q.len() >= 4 && v.to_lowercase().contains(&q)))
    })
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ResolveArgs {
    /// A name, API number or alias.
    query: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct ContextArgs {
    /// The entity id.
    entity_id: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct CreateEntityArgs {
    /// Entity kind: operator, well, lease.
    kind: String,
    /// Display name.
    name: String,
    /// An external identifier (operator number, API number).
    #[serde(default)]
    external_id: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct SpacingArgs {
    /// API number of the proposed well (its location, lease and neighbours come from the
    /// field data).
    well_api: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct OffsetArgs {
    /// API number of the well.
    well_api: String,
    /// Search radius in feet (default 2,640).
    #[serde(default)]
    radius_ft: Option<f64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct WellArgs {
    /// API number of the well.
    well_api: String,
}

fn block(status: &str, message: impl Into<String>, result: Value) -> Value {
    json!({"status": status, "message": message.into(), "result": result})
}

/// A field computation as a code-block result; what it could not compute (an unknown
/// well, missing coordinates) is a validation error the model sees.
fn computed(
    r: Result<Value, FieldError>,
    message: impl FnOnce(&Value) -> String,
) -> Result<Value, ToolError> {
    let v = r.map_err(|e| ToolError::validation(e.to_string()))?;
    Ok(block("ok", message(&v), v))
}

/// The knowledge-graph key `create_entity` writes for one frozen call: derived from the
/// thread and the original tool call id, so a replay writes the same entity.
#[must_use]
pub fn entity_key(thread_id: &str, tool_call_id: &str) -> String {
    uuid::Uuid::new_v5(
        &uuid::Uuid::NAMESPACE_OID,
        format!("permit-filing/entity/{thread_id}/{tool_call_id}").as_bytes(),
    )
    .to_string()
}

async fn create_entity(a: CreateEntityArgs, rt: ToolRuntime) -> Result<Value, ToolError> {
    let store = rt
        .store()
        .ok_or_else(|| ToolError::unavailable("the knowledge graph store is not configured"))?;
    let key = entity_key(rt.thread_id().unwrap_or(""), &rt.tool_call_id);
    let ns = entities_ns();
    if let Some(existing) = store
        .get(&ns, &key)
        .await
        .map_err(|e| ToolError::unavailable(e.to_string()))?
    {
        return Ok(json!({"status": "exists", "entity": existing.value}));
    }
    let entity = json!({"id": key, "kind": a.kind, "name": a.name, "external_id": a.external_id,
                        "created_by_call": rt.tool_call_id});
    store
        .put(&ns, &key, entity.clone(), PutOptions::default())
        .await
        .map_err(|e| ToolError::unavailable(e.to_string()))?;
    Ok(json!({"status": "created", "entity": entity}))
}

/// Every tool of the example, by name.
#[must_use]
pub fn all_tools() -> BTreeMap<String, Arc<dyn Tool>> {
    tool_list(true)
        .into_iter()
        .map(|t| (t.name().to_owned(), t))
        .collect()
}

/// Every tool of the example, with `create_entity` marked mutating (the tool node's own
/// gate asks before it runs) or not (a middleware gates it: see [`crate::agent`]).
#[must_use]
pub fn tool_list(gate_in_tool_node: bool) -> Vec<Arc<dyn Tool>> {
    let create = FnTool::new(
        "create_entity",
        "Create an entity in the knowledge graph (needs approval)",
        create_entity,
    );
    let create = if gate_in_tool_node {
        create.mark_mutating()
    } else {
        create
    };
    vec![
        FnTool::new(
            "entity_resolve",
            "Resolve an entity by name, API number or alias",
            |a: ResolveArgs, rt: ToolRuntime| async move {
                let found: Vec<Value> = all_entities(rt.store())
                    .await
                    .into_iter()
                    .filter(|e| matches(e, &a.query))
                    .collect();
                Ok::<_, ToolError>(match found.as_slice() {
                    [one] => json!({"status": "resolved", "entity": one}),
                    [] => json!({"status": "not_found", "query": a.query}),
                    many => json!({"status": "ambiguous", "candidates": many}),
                })
            },
        )
        .arc(),
        FnTool::new(
            "context_assemble",
            "Assemble an entity's context",
            |a: ContextArgs, rt: ToolRuntime| async move {
                let all = all_entities(rt.store()).await;
                let entity = all.iter().find(|e| e["id"] == a.entity_id.as_str()).cloned();
                let related: Vec<Value> = match &entity {
                    Some(e) => all
                        .iter()
                        .filter(|o| o["lease"] == e["lease"] && o["id"] != e["id"] && !e["lease"].is_null())
                        .cloned()
                        .collect(),
                    None => Vec::new(),
                };
                Ok::<_, ToolError>(json!({"entity": entity, "related": related}))
            },
        )
        .arc(),
        create.arc(),
        FnTool::new(
            "spacing_assessment",
            "Assess a well's spacing against Statewide Rule 37 from its surveyed location",
            |a: SpacingArgs, _rt| async move {
                computed(field::spacing(&a.well_api), |v| {
                    format!(
                        "spacing of {} assessed: {} ft to the {} lease line, exception {}",
                        a.well_api,
                        v["lease_line_distance_ft"],
                        v["nearest_lease_line"].as_str().unwrap_or("nearest"),
                        if v["exception_required"] == true {
                            "required"
                        } else {
                            "not required"
                        }
                    )
                })
            },
        )
        .arc(),
        FnTool::new(
            "offset_well_analysis",
            "Find offset wells within regulatory distance",
            |a: OffsetArgs, _rt| async move {
                let radius = a
                    .radius_ft
                    .filter(|r| r.is_finite() && *r > 0.0)
                    .unwrap_or(field::OFFSET_RADIUS_FT);
                computed(field::offset_wells(&a.well_api, radius), |v| {
                    format!(
                        "{} offset wells within {radius} ft",
                        v["offsets"].as_array().map_or(0, Vec::len)
                    )
                })
            },
        )
        .arc(),
        FnTool::new(
            "rule37_filing_assembly",
            "Assemble the complete Form W-1 filing package",
            |a: WellArgs, _rt| async move {
                computed(field::w1_filing(&a.well_api), |v| {
                    format!("Form W-1 package {}", v["status"].as_str().unwrap_or("assembled"))
                })
            },
        )
        .arc(),
        FnTool::new(
            "good_cause_narrative",
            "Generate the good cause justification",
            |a: WellArgs, _rt| async move {
                computed(field::good_cause(&a.well_api), |v| {
                    if v["exception_required"] == true {
                        "good cause narrative drafted".to_owned()
                    } else {
                        "regular location: no good cause statement needed".to_owned()
                    }
                })
            },
        )
        .arc(),
        // Both read the well's flaring record on file: the model names the well, never
        // the volumes.
        FnTool::new(
            "flaring_volume_calc",
            "Calculate flaring volumes against Rule 32 thresholds",
            |a: WellArgs, _rt| async move {
                computed(field::flaring(&a.well_api), |v| {
                    format!(
                        "{} mcf flared over {} days ({} allowed)",
                        v["total_mcf"], v["days"], v["allowed_days"]
                    )
                })
            },
        )
        .arc(),
        FnTool::new(
            "emissions_estimate",
            "Estimate CO2e emissions with EPA factors",
            |a: WellArgs, _rt| async move {
                computed(field::flaring(&a.well_api), |v| {
                    format!("{} t CO2e from {} mcf flared", v["co2e_tonnes"], v["total_mcf"])
                })
            },
        )
        .arc(),
        FnTool::new(
            "gas_analysis",
            "Analyse gas composition and pipeline readiness",
            |a: WellArgs, _rt| async move {
                computed(field::gas_analysis(&a.well_api), |v| {
                    if v["pipeline_ready"] == true {
                        "gas analysed: pipeline ready".to_owned()
                    } else {
                        format!(
                            "gas analysed: not pipeline ready ({} reasons)",
                            v["reasons"].as_array().map_or(0, Vec::len)
                        )
                    }
                })
            },
        )
        .arc(),
        FnTool::new(
            "rule32_filing_assembly",
            "Assemble the Form R-32 filing package",
            |a: WellArgs, _rt| async move {
                computed(field::r32_filing(&a.well_api), |v| {
                    format!(
                        "Form R-32 package {}",
                        v["status"].as_str().unwrap_or("assembled")
                    )
                })
            },
        )
        .arc(),
    ]
}
