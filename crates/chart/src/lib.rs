//! Line charts as self-contained SVG (no fonts or libraries needed), for
//! bench reports and watch's server pages.
//!
//! Written by hand because the charts are few and simple, must embed in a
//! single HTML page (or be served as is), and must render the same in a
//! browser and in the PNG renderer (`png.rs`): round axis ticks (1-2-5 steps; whole
//! numbers for counted things such as processes), error bars where a
//! spread is known, shaded bands (a warm-up, incidents), and the legend
//! under the plot so long labels are never cut off. Every point is a
//! circle carrying its values (`data-x`, `data-y`), so a page can show
//! them and a test can read them.

mod line;
pub mod png;

pub use line::{line_chart, ticks, Chart, Series};
