//! The domain tools compute their answers from the bundled field data: spacing from the
//! surveyed locations and lease boundaries (not from distances the model supplies), offset
//! wells by distance, good cause, Form W-1 and Form R-32 packages, gas analysis.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use graphloom_prebuilt::ToolRuntime;
use permit_filing::field::{self, haversine_ft, BETWEEN_WELL_MINIMUM_FT, LEASE_LINE_MINIMUM_FT};
use permit_filing::skills::all_tools;
use serde_json::{json, Value};

async fn call(tool: &str, args: Value) -> Result<Value, String> {
    let tools = all_tools();
    let t = tools.get(tool).unwrap_or_else(|| panic!("no tool {tool}"));
    t.call(args, ToolRuntime::detached(json!({}), "c1"))
        .await
        .map(|o| o.content["result"].clone())
        .map_err(|e| e.to_string())
}

fn location(api: &str) -> [f64; 2] {
    field::field()
        .unwrap()
        .well(api)
        .unwrap()
        .surface_location
        .unwrap()
}

#[tokio::test]
async fn spacing_is_computed_from_the_well_location_and_lease_boundary() {
    let v = call("spacing_assessment", json!({"well_api": "42-329-12345"}))
        .await
        .unwrap();
    // Mitchell Ranch 1H sits 0.0011 degrees of longitude inside the west line: about 341 ft.
    let line = v["lease_line_distance_ft"].as_f64().unwrap();
    let expected = haversine_ft(location("42-329-12345"), [31.9973, -102.0790]);
    assert!((line - expected.round()).abs() < 1.0, "{line} vs {expected}");
    assert!((330.0..350.0).contains(&line), "{line}");
    assert_eq!(v["nearest_lease_line"], "west");
    // The nearest well on the Spraberry is 2H, by haversine between the two locations.
    assert_eq!(v["nearest_well"]["api"], "42-329-12346");
    let between = haversine_ft(location("42-329-12345"), location("42-329-12346"));
    assert_eq!(v["nearest_well_distance_ft"].as_f64().unwrap(), between.round());
    assert!(between > BETWEEN_WELL_MINIMUM_FT);
    assert_eq!(v["lease_line_ok"], false);
    assert_eq!(v["between_well_ok"], true);
    assert_eq!(v["exception_required"], true);
}

#[tokio::test]
async fn spacing_ignores_distances_the_model_supplies() {
    // A model claiming a regular location does not make it one.
    let v = call(
        "spacing_assessment",
        json!({"well_api": "42-329-12345", "lease_line_distance_ft": 5000, "nearest_well_distance_ft": 5000}),
    )
    .await
    .unwrap();
    assert_eq!(v["exception_required"], true);
    assert!(v["lease_line_distance_ft"].as_f64().unwrap() < LEASE_LINE_MINIMUM_FT);
}

#[tokio::test]
async fn a_regular_location_needs_no_exception() {
    let v = call("spacing_assessment", json!({"well_api": "42-329-12346"}))
        .await
        .unwrap();
    assert!(v["lease_line_distance_ft"].as_f64().unwrap() >= LEASE_LINE_MINIMUM_FT);
    assert_eq!(v["nearest_well"]["api"], "42-329-12345");
    assert_eq!(v["exception_required"], false);
}

#[tokio::test]
async fn an_unknown_well_is_an_error_not_an_answer() {
    let err = call("spacing_assessment", json!({"well_api": "42-000-00000"}))
        .await
        .unwrap_err();
    assert!(err.contains("no well with API number 42-000-00000"), "{err}");
    let err = call("gas_analysis", json!({"well_api": "42-329-11873"}))
        .await
        .unwrap_err();
    assert!(err.contains("no gas analysis"), "{err}");
}

#[tokio::test]
async fn offset_wells_are_the_wells_within_the_radius_nearest_first() {
    let v = call("offset_well_analysis", json!({"well_api": "42-329-12345"}))
        .await
        .unwrap();
    let apis: Vec<&str> = v["offsets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["api"].as_str().unwrap())
        .collect();
    // 2H (~1,320 ft) then Hadley 3 on the neighbouring lease (~1,440 ft); Tejas Flats is
    // forty miles away.
    assert_eq!(apis, ["42-329-12346", "42-329-11873"]);
    assert_eq!(v["offset_operators"], json!(["Llano Resources Inc"]));
    // A smaller radius keeps only 2H, whose operator is the well's own.
    let v = call(
        "offset_well_analysis",
        json!({"well_api": "42-329-12345", "radius_ft": 1400}),
    )
    .await
    .unwrap();
    assert_eq!(v["offsets"].as_array().unwrap().len(), 1);
    assert_eq!(v["offset_operators"], json!([]));
}

#[tokio::test]
async fn the_good_cause_narrative_argues_from_the_shortfall_and_names_offset_operators() {
    let v = call("good_cause_narrative", json!({"well_api": "42-329-12345"}))
        .await
        .unwrap();
    assert_eq!(v["exception_required"], true);
    let text = v["narrative"].as_str().unwrap();
    let line = v["arguments"][1]["text"].as_str().unwrap();
    assert!(
        line.contains("ft from the west line of the 640-acre Mitchell Ranch Lease (467 ft required)"),
        "{line}"
    );
    assert!(
        !line.contains("on the same reservoir"),
        "the between-well distance is regular: {line}"
    );
    assert!(text.contains("Lower Spraberry"), "{text}");
    assert!(text.contains("Llano Resources Inc (Hadley 3,"), "{text}");
    // A regular location gets no argument at all.
    let v = call("good_cause_narrative", json!({"well_api": "42-329-12346"}))
        .await
        .unwrap();
    assert_eq!(v["exception_required"], false);
    assert_eq!(v["arguments"], json!([]));
}

#[tokio::test]
async fn the_w1_package_carries_the_spacing_the_statement_and_the_notices() {
    let v = call("rule37_filing_assembly", json!({"well_api": "42-329-12345"}))
        .await
        .unwrap();
    assert_eq!(v["form"], "W-1");
    assert_eq!(v["status"], "complete");
    assert_eq!(v["rule37_exception_requested"], true);
    assert_eq!(v["offset_operators_to_notify"], json!(["Llano Resources Inc"]));
    assert!(v["good_cause_statement"]
        .as_str()
        .unwrap()
        .contains("Mitchell Ranch 1H"));
    assert_eq!(
        v["attachments"],
        json!([
            "plat of the lease with the surface location",
            "good cause statement",
            "list of offset operators notified"
        ])
    );
    let regular = call("rule37_filing_assembly", json!({"well_api": "42-329-12346"}))
        .await
        .unwrap();
    assert_eq!(regular["rule37_exception_requested"], false);
    assert_eq!(
        regular["attachments"],
        json!(["plat of the lease with the surface location"])
    );
    assert_eq!(regular["good_cause_statement"], Value::Null);
}

#[tokio::test]
async fn gas_analysis_reads_the_composition_against_the_pipeline_specification() {
    let ok = call("gas_analysis", json!({"well_api": "42-329-12346"}))
        .await
        .unwrap();
    assert_eq!(ok["pipeline_ready"], true, "{ok}");
    let btu = ok["heating_value_btu_per_scf"].as_f64().unwrap();
    // 0.782*1010 + 0.114*1769.7 + 0.051*2516.1 + 0.020*3262.3 + 0.008*4008.9
    assert!((btu - 1217.2).abs() < 0.2, "{btu}");
    let sour = call("gas_analysis", json!({"well_api": "42-317-30211"}))
        .await
        .unwrap();
    assert_eq!(sour["pipeline_ready"], false);
    assert_eq!(sour["meets_spec"], false);
    let reasons: Vec<&str> = sour["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap())
        .collect();
    assert_eq!(reasons.len(), 4, "{reasons:?}");
    assert!(reasons[0].starts_with("CO2 3.4%"));
    assert!(reasons[1].starts_with("nitrogen 6.8%"));
    assert!(reasons[2].starts_with("H2S 18 ppm"));
    assert!(reasons[3].contains("connection expected 2027-03-01"));
}

#[tokio::test]
async fn the_r32_package_sums_the_flaring_record() {
    let v = call("rule32_filing_assembly", json!({"well_api": "42-317-30211"}))
        .await
        .unwrap();
    assert_eq!(v["form"], "R-32");
    let f = &v["flaring"];
    assert_eq!(f["days"], 14);
    assert_eq!(f["total_mcf"].as_f64().unwrap(), 8141.0);
    assert_eq!(f["peak_mcfd"].as_f64().unwrap(), 702.0);
    // Days 11 to 14 flared beyond the ten allowed.
    assert_eq!(
        f["mcf_beyond_allowed_days"].as_f64().unwrap(),
        522.0 + 515.0 + 508.0 + 497.0
    );
    assert!((v["co2e_tonnes"].as_f64().unwrap() - 448.6).abs() < 0.05);
    assert_eq!(v["exception_required"], true);
    assert_eq!(v["requested_until"], "2027-03-01");
    assert_eq!(v["gas_analysis"]["pipeline_ready"], false);
    let err = call("rule32_filing_assembly", json!({"well_api": "42-329-12346"}))
        .await
        .unwrap_err();
    assert!(err.contains("no flaring records"), "{err}");
}

#[tokio::test]
async fn flaring_volumes_and_emissions_come_from_the_record_not_the_model() {
    // The model names the well; volumes it supplies are not read.
    let v = call(
        "flaring_volume_calc",
        json!({"well_api": "42-317-30211", "daily_mcf": 1.0, "days": 1}),
    )
    .await
    .unwrap();
    assert_eq!(v["days"], 14);
    assert_eq!(v["total_mcf"].as_f64().unwrap(), 8141.0);
    assert_eq!(v["beyond_allowed_days"], true);
    assert_eq!(
        v["mcf_beyond_allowed_days"].as_f64().unwrap(),
        522.0 + 515.0 + 508.0 + 497.0
    );
    let e = call(
        "emissions_estimate",
        json!({"well_api": "42-317-30211", "daily_mcf": 1.0, "days": 1}),
    )
    .await
    .unwrap();
    assert!((e["co2e_tonnes"].as_f64().unwrap() - 448.6).abs() < 0.05, "{e}");
    // A well without flaring records gets an error, not a made-up volume.
    let err = call("flaring_volume_calc", json!({"well_api": "42-329-12346"}))
        .await
        .unwrap_err();
    assert!(err.contains("no flaring records"), "{err}");
}
