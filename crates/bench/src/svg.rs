//! Line charts as self-contained SVG (no fonts or libraries needed).

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

const COLORS: &[&str] = &[
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn nice(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v.fract() == 0.0 || v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart, `w` x `h` pixels, y axis from zero.
pub fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[Series]) -> String {
    let (w, h) = (720.0, 420.0);
    let (l, r, t, b) = (70.0, 170.0, 40.0, 50.0);
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y1 = y1.max(y);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= 0.0 {
        y1 = 1.0;
    }
    y1 *= 1.08;
    let px = |x: f64| l + (x - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| h - b - y / y1 * (h - t - b);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        (w - r + l) / 2.0,
        esc(title)
    );
    for i in 0..=5 {
        let yv = y1 * i as f64 / 5.0;
        let y = py(yv);
        s.push_str(&format!(
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            w - r,
            l - 6.0,
            y + 4.0,
            nice(yv)
        ));
        let xv = x0 + (x1 - x0) * i as f64 / 5.0;
        s.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            px(xv),
            h - b + 18.0,
            nice(xv)
        ));
    }
    s.push_str(&format!(
        "<line x1=\"{l}\" x2=\"{l}\" y1=\"{t}\" y2=\"{}\" stroke=\"black\"/><line x1=\"{l}\" x2=\"{}\" y1=\"{}\" y2=\"{}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n\
         <text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        h - b,
        w - r,
        h - b,
        h - b,
        (w - r + l) / 2.0,
        h - 10.0,
        esc(x_label),
        (h - b + t) / 2.0,
        esc(y_label)
    ));
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let path: Vec<String> = se
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>\n",
            path.join(" ")
        ));
        for &(x, y) in &se.points {
            s.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/>\n",
                px(x),
                py(y)
            ));
        }
        let ly = t + 16.0 * i as f64 + 10.0;
        s.push_str(&format!(
            "<rect x=\"{}\" y=\"{:.1}\" width=\"12\" height=\"3\" fill=\"{c}\"/><text x=\"{}\" y=\"{:.1}\">{}</text>\n",
            w - r + 12.0,
            ly - 4.0,
            w - r + 28.0,
            ly,
            esc(&se.label)
        ));
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_formed_svg_with_every_series() {
        let svg = line_chart(
            "qps <by> target",
            "queries per connection",
            "queries/s",
            &[
                Series {
                    label: "direct".into(),
                    points: vec![(1.0, 100.0), (2.0, 250.0)],
                },
                Series {
                    label: "via a&b".into(),
                    points: vec![(1.0, 300.0), (2.0, 320.0)],
                },
            ],
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("qps &lt;by&gt; target") && svg.contains("via a&amp;b"));
        // Balanced tags: every opened element is closed or self-closed.
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        let empty = line_chart("t", "x", "y", &[]);
        assert!(empty.ends_with("</svg>\n"));
    }
}
