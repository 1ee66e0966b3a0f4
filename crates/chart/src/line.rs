//! The line chart: series, axes with round ticks, bands, the legend, the
//! SVG text (see the crate's doc for what it must do and why by hand).

/// One line of a chart.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
    /// One standard deviation per point (drawn as an error bar), if known.
    pub errors: Vec<f64>,
    /// A colour index shared by related lines (default: the series' own).
    pub color: Option<usize>,
    /// An SVG dash pattern (e.g. "6 3") telling related lines apart.
    pub dash: Option<&'static str>,
}

impl Series {
    pub fn new(label: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            label: label.into(),
            points,
            errors: Vec::new(),
            color: None,
            dash: None,
        }
    }
}

/// A chart: its axes, lines and an optional shaded x range.
pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// The x values are counts (processes, queries per connection): whole
    /// ticks only.
    pub x_integer: bool,
    /// Shaded x ranges with their labels, e.g. (0.5, 1.5, "warm-up").
    pub bands: &'a [(f64, f64, &'a str)],
    /// The bands' colour (e.g. "#eee" for a warm-up, "#fdd" for incidents).
    pub band_fill: &'a str,
    /// An x range the axis covers even where no point lies (e.g. the last
    /// hour of a time chart).
    pub x_range: Option<(f64, f64)>,
    /// A categorical axis: ticks at these positions with these labels
    /// instead of a numeric scale, for sweeps over chosen values (1, 5,
    /// 30 queries per connection sit evenly, and nothing suggests the
    /// values between them were measured). Points carry their label in
    /// `data-x`.
    pub x_ticks: Option<&'a [(f64, String)]>,
    pub series: &'a [Series],
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

/// Round ticks covering `lo..=hi`: steps of 1, 2 or 5 times a power of
/// ten, about `want` of them; whole steps when `integer`.
pub fn ticks(lo: f64, hi: f64, want: usize, integer: bool) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi < lo {
        return vec![0.0, 1.0];
    }
    let span = (hi - lo).max(if integer { 1.0 } else { f64::MIN_POSITIVE });
    let raw = span / want.max(1) as f64;
    // step = m x 10^e; ticks are k x step, computed so that 0.1 x 3 is 0.3.
    let mut e = raw.log10().floor() as i32;
    let mut m = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .find(|m| m * 10f64.powi(e) >= raw)
        .unwrap_or(10.0);
    if m == 10.0 {
        (m, e) = (1.0, e + 1);
    }
    if integer && e < 0 {
        (m, e) = (1.0, 0);
    }
    let at = |k: f64| {
        if e >= 0 {
            k * m * 10f64.powi(e)
        } else {
            k * m / 10f64.powi(-e)
        }
    };
    let step = at(1.0);
    let k0 = (lo / step).floor();
    let mut out = Vec::new();
    let mut k = k0;
    loop {
        let v = at(k);
        out.push(if v == 0.0 { 0.0 } else { v });
        if v >= hi - step * 1e-9 || out.len() >= 50 {
            break;
        }
        k += 1.0;
    }
    out
}

/// A tick's text: thousands as `k` on an axis that reaches 10,000 (every
/// tick of it, so they read alike), no needless decimals.
fn label(v: f64, thousands: bool) -> String {
    if thousands && v != 0.0 {
        let k = v / 1000.0;
        if k.fract() == 0.0 {
            format!("{k:.0}k")
        } else {
            format!("{k:.1}k")
        }
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else if (v * 10.0).fract().abs() < 1e-9 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// What the chart must show: the x range of its points, bands and
/// `x_range`, and the highest point with its error bar.
fn extent(c: &Chart) -> (f64, f64, f64) {
    let (mut x0, mut x1, mut y1) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for s in c.series {
        for (i, &(x, y)) in s.points.iter().enumerate() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y1 = y1.max(y + s.errors.get(i).copied().unwrap_or(0.0));
        }
    }
    for &(a, z, _) in c
        .bands
        .iter()
        .chain(c.x_range.map(|(a, z)| (a, z, "")).iter())
    {
        x0 = x0.min(a);
        x1 = x1.max(z);
    }
    if !x0.is_finite() {
        (x0, x1) = (0.0, 1.0);
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    (x0, x1, y1)
}

/// The chart as SVG, 760 pixels wide; the y axis starts at zero.
pub fn line_chart(c: &Chart) -> String {
    let w = 760.0;
    let (l, r, t, b) = (78.0, 24.0, 40.0, 52.0);
    let plot_h = 340.0;
    let legend_h = 18.0 * c.series.len() as f64 + 8.0;
    let h = t + plot_h + b + legend_h;
    let (x0, x1, y1) = extent(c);
    let xt = match c.x_ticks {
        Some(t) => t.iter().map(|p| p.0).collect(),
        None => ticks(x0, x1, 6, c.x_integer),
    };
    let tick_label = |xv: f64, k: bool| match c.x_ticks {
        Some(t) => t
            .iter()
            .find(|p| p.0 == xv)
            .map(|p| esc(&p.1))
            .unwrap_or_default(),
        None => label(xv, k),
    };
    let (x0, x1) = (
        xt.first().copied().unwrap_or(x0).min(x0),
        xt.last().copied().unwrap_or(x1).max(x1),
    );
    // Headroom: the highest point never touches the top of the plot.
    let yt = ticks(0.0, if y1 > 0.0 { y1 * 1.08 } else { 1.0 }, 5, false);
    let y1 = yt.last().copied().unwrap_or(1.0);
    let bottom = t + plot_h;
    // A little air between the axis and the first and last points.
    let pad = (x1 - x0) * 0.03;
    let (x0, x1) = (x0 - pad, x1 + pad);
    let ky = yt.last().is_some_and(|v| *v >= 10_000.0);
    let kx = xt.last().is_some_and(|v| *v >= 10_000.0);
    let px = |x: f64| l + (x - x0) / (x1 - x0) * (w - l - r);
    let py = |y: f64| bottom - y / y1 * plot_h;
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"sans-serif\" font-size=\"12\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n\
         <text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
        (w - r + l) / 2.0,
        esc(c.title)
    );
    for &(a, z, text) in c.bands {
        s.push_str(&format!(
            "<rect class=\"band\" x=\"{:.1}\" y=\"{t}\" width=\"{:.1}\" height=\"{plot_h}\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#777\">{}</text>\n",
            px(a),
            (px(z) - px(a)).max(0.0),
            esc(c.band_fill),
            (px(a) + px(z)) / 2.0,
            t + 14.0,
            esc(text)
        ));
    }
    for &yv in &yt {
        let y = py(yv);
        s.push_str(&format!(
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            w - r,
            l - 6.0,
            y + 4.0,
            label(yv, ky)
        ));
    }
    for &xv in &xt {
        let x = px(xv);
        s.push_str(&format!(
            "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{bottom}\" y2=\"{}\" stroke=\"black\"/><text x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
            bottom + 4.0,
            bottom + 18.0,
            tick_label(xv, kx)
        ));
    }
    s.push_str(&format!(
        "<line x1=\"{l}\" x2=\"{l}\" y1=\"{t}\" y2=\"{bottom}\" stroke=\"black\"/><line x1=\"{l}\" x2=\"{}\" y1=\"{bottom}\" y2=\"{bottom}\" stroke=\"black\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n\
         <text transform=\"translate(16 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        w - r,
        (w - r + l) / 2.0,
        bottom + 38.0,
        esc(c.x_label),
        t + plot_h / 2.0,
        esc(c.y_label)
    ));
    for (i, se) in c.series.iter().enumerate() {
        let col = COLORS[se.color.unwrap_or(i) % COLORS.len()];
        let dash = se
            .dash
            .map(|d| format!(" stroke-dasharray=\"{d}\""))
            .unwrap_or_default();
        let path: Vec<String> = se
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        s.push_str(&format!(
            "<polyline fill=\"none\" stroke=\"{col}\" stroke-width=\"2\"{dash} points=\"{}\"/>\n",
            path.join(" ")
        ));
        for (j, &(x, y)) in se.points.iter().enumerate() {
            if let Some(&e) = se.errors.get(j).filter(|e| **e > 0.0) {
                let (cx, lo, hi) = (px(x), py((y - e).max(0.0)), py(y + e));
                s.push_str(&format!(
                    "<path d=\"M{cx:.1},{lo:.1}V{hi:.1}M{:.1},{lo:.1}H{:.1}M{:.1},{hi:.1}H{:.1}\" stroke=\"{col}\" fill=\"none\"/>\n",
                    cx - 4.0,
                    cx + 4.0,
                    cx - 4.0,
                    cx + 4.0
                ));
            }
            s.push_str(&format!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{col}\" data-x=\"{}\" data-y=\"{y}\"/>\n",
                px(x),
                py(y),
                match c.x_ticks {
                    Some(_) => tick_label(x, false),
                    None => x.to_string(),
                }
            ));
        }
        let ly = bottom + b + 18.0 * i as f64 + 6.0;
        s.push_str(&format!(
            "<line x1=\"{l}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{col}\" stroke-width=\"2\"{dash}/><text x=\"{}\" y=\"{:.1}\">{}</text>\n",
            l + 22.0,
            ly - 4.0,
            ly - 4.0,
            l + 28.0,
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
    fn round_ticks() {
        assert_eq!(
            ticks(0.0, 2925.0 * 1.08, 5, false),
            vec![0.0, 1000.0, 2000.0, 3000.0, 4000.0]
        );
        assert_eq!(ticks(1.0, 4.0, 6, true), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(ticks(1.0, 20.0, 6, true), vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(ticks(0.0, 0.37, 5, false), vec![0.0, 0.1, 0.2, 0.3, 0.4]);
        // Integer axes never get fractional ticks.
        for hi in 2..40 {
            assert!(ticks(1.0, hi as f64, 6, true)
                .iter()
                .all(|t| t.fract() == 0.0));
        }
    }

    proptest::proptest! {
        #[test]
        fn ticks_cover_the_range(lo in -1e6f64..1e6, span in 0f64..1e7, integer: bool) {
            let t = ticks(lo, lo + span, 5, integer);
            proptest::prop_assert!(t.len() >= 2 && t.len() <= 50);
            proptest::prop_assert!(t[0] <= lo && *t.last().unwrap_or(&0.0) >= lo + span - 1e-6 * span.max(1.0));
        }
    }

    #[test]
    fn well_formed_svg_with_every_series() {
        let series = [
            Series {
                label: "direct".into(),
                points: vec![(1.0, 100.0), (2.0, 250.0)],
                errors: vec![10.0, 20.0],
                color: None,
                dash: None,
            },
            Series::new("via a&b", vec![(1.0, 300.0), (2.0, 320.0)]),
        ];
        let svg = line_chart(&Chart {
            title: "qps <by> target",
            x_label: "queries per connection",
            y_label: "queries/s",
            x_integer: true,
            bands: &[(0.5, 1.5, "warm-up")],
            band_fill: "#eee",
            x_range: None,
            x_ticks: None,
            series: &series,
        });
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(
            svg.matches("<path").count(),
            2,
            "one error bar per point with an sd"
        );
        assert!(svg.contains("qps &lt;by&gt; target") && svg.contains("via a&amp;b"));
        assert!(svg.contains(">warm-up</text>"));
        // Balanced tags: every opened element is closed or self-closed.
        assert_eq!(svg.matches("<text").count(), svg.matches("</text>").count());
        let empty = line_chart(&Chart {
            title: "t",
            x_label: "x",
            y_label: "y",
            x_integer: false,
            bands: &[],
            band_fill: "#eee",
            x_range: None,
            x_ticks: None,
            series: &[],
        });
        assert!(empty.ends_with("</svg>\n"));
    }
}
