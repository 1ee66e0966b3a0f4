//! PNG copies of the SVG charts, rendered in this process (resvg: usvg
//! parses, tiny-skia rasterises) with the machine's own fonts, so every
//! chart exists as SVG and PNG without outside programs.

use std::sync::Arc;

use resvg::{tiny_skia, usvg};

#[derive(Debug, thiserror::Error)]
pub enum PngError {
    #[error("the chart is not SVG this renderer reads: {0}")]
    Parse(String),
    #[error("a {0}x{1} picture is too large to draw")]
    Size(u32, u32),
    #[error("encoding the PNG: {0}")]
    Encode(String),
}

/// Draws SVG to PNG; keeps the font database between charts.
pub struct Renderer {
    options: usvg::Options<'static>,
    /// Why chart text may be missing (no fonts found), for the caller to say.
    pub font_warning: Option<String>,
}

/// Families tried, in order, for the charts' `sans-serif`.
const SANS: &[&str] = &[
    "DejaVu Sans",
    "Liberation Sans",
    "Noto Sans",
    "FreeSans",
    "Arial",
    "Helvetica",
];

impl Default for Renderer {
    fn default() -> Self {
        let mut options = usvg::Options::default();
        let db = Arc::make_mut(&mut options.fontdb);
        db.load_system_fonts();
        let families: Vec<String> = db
            .faces()
            .flat_map(|f| f.families.iter().map(|(n, _)| n.clone()))
            .collect();
        let font_warning = if families.is_empty() {
            Some("no fonts found on this machine: PNG charts have no text (install fonts-dejavu-core; the SVG copies are complete)".to_string())
        } else {
            let pick = SANS
                .iter()
                .find(|s| families.iter().any(|f| f == *s))
                .map(|s| s.to_string())
                .unwrap_or_else(|| families[0].clone());
            db.set_sans_serif_family(pick);
            None
        };
        Renderer {
            options,
            font_warning,
        }
    }
}

impl Renderer {
    /// The PNG of an SVG document, `scale` times its size.
    pub fn png(&self, svg: &str, scale: f32) -> Result<Vec<u8>, PngError> {
        let tree =
            usvg::Tree::from_str(svg, &self.options).map_err(|e| PngError::Parse(e.to_string()))?;
        let size = tree.size().to_int_size().scale_by(scale);
        let (w, h) = size.map_or((0, 0), |s| (s.width(), s.height()));
        let mut pixmap = tiny_skia::Pixmap::new(w, h).ok_or(PngError::Size(w, h))?;
        resvg::render(
            &tree,
            tiny_skia::Transform::from_scale(scale, scale),
            &mut pixmap.as_mut(),
        );
        pixmap
            .encode_png()
            .map_err(|e| PngError::Encode(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_becomes_a_png_of_its_size() {
        let svg = crate::line_chart(&crate::Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            x_integer: true,
            bands: &[],
            band_fill: "#eee",
            x_range: None,
            x_ticks: None,
            series: &[crate::Series::new("s", vec![(1.0, 2.0), (2.0, 3.0)])],
        });
        let r = Renderer::default();
        let png = r.png(&svg, 1.0).expect("png");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        // Width and height from the IHDR chunk: the SVG's 760 wide.
        let w = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
        assert_eq!(w, 760);
        assert!(r.png("not svg", 1.0).is_err());
    }
}
