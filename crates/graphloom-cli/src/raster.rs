//! `graphloom draw --format png`: the SVG drawing rasterised with resvg, text set in the
//! system's fonts (none installed: boxes and edges without their names).

use anyhow::Context as _;

/// Pixels per SVG unit: a PNG sharp on high-density screens.
const SCALE: f32 = 2.0;

/// The PNG bytes of `svg`.
pub(crate) fn png(svg: &str) -> anyhow::Result<Vec<u8>> {
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    let tree = resvg::usvg::Tree::from_str(svg, &options).context("the drawing is not valid SVG")?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(SCALE)
        .context("the drawing is too large")?;
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .context("the drawing is too large to rasterise")?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::from_scale(SCALE, SCALE),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().context("cannot encode the PNG")
}
