//! `mcpx-bench plot`: one PNG of a results file (bench/results.json), for reading at a
//! glance next to docs/performance.md.
//!
//! Four panels: HTTP throughput and HTTP p99 latency per concurrency level for every
//! contender (log scales: the peers are orders of magnitude apart), the stdio relay
//! against the direct line, and sessions plus cold start. It reads only the JSON, so a
//! committed results file can be redrawn without measuring again. Text needs a TrueType
//! font, read at run time (`MCPX_BENCH_FONT`, else DejaVu Sans where Debian puts it):
//! plotters' `ab_glyph` backend, so no system font library is linked.

use std::path::Path;

use anyhow::{Context, bail};
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use serde_json::Value;

const WIDTH: u32 = 1800;
const HEIGHT: u32 = 1300;
const FONT: &str = "sans-serif";
/// Where Debian and Ubuntu (`fonts-dejavu-core`) put the font, tried in order.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// One colour per HTTP contender, in the order the bench lists them.
const SERIES: &[(&str, RGBColor)] = &[
    ("direct-http", RGBColor(90, 90, 90)),
    ("mcpx-http", RGBColor(31, 119, 180)),
    ("mcpx-stdio", RGBColor(44, 160, 44)),
    ("mcpx-legacy", RGBColor(255, 127, 14)),
    ("mcpx-exposed", RGBColor(23, 190, 207)),
    ("mcpx-exposed-prefixed", RGBColor(188, 189, 34)),
    ("mcpx-legacy-exposed", RGBColor(227, 119, 194)),
    ("mcpx-legacy-exposed-prefixed", RGBColor(140, 86, 75)),
    ("mcp-proxy", RGBColor(214, 39, 40)),
    ("fastmcp", RGBColor(148, 103, 189)),
];

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Draws `document` (a results file) into `png`.
pub fn draw(document: &Value, png: &Path) -> anyhow::Result<()> {
    load_font()?;
    let root = BitMapBackend::new(png, (WIDTH, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(70);
    draw_header(&header, document)?;
    let panels = body.split_evenly((2, 2));
    let runs = document["runs"].as_array().context("the results have no runs")?;
    let http: Vec<&Value> = runs.iter().filter(|r| r["scenario"] == "http").collect();
    http_panel(&panels[0], &http, "HTTP throughput (calls/s, log scale; more is better)", |c| {
        c["callsPerSecond"].as_f64()
    })?;
    http_panel(&panels[1], &http, "HTTP p99 latency (ms, log scale; less is better)", |c| {
        c["latencyMicros"]["p99"].as_f64().map(|us| us / 1000.0)
    })?;
    bars_panel(&panels[2], "stdio relay: one sequential client (µs; less is better)", &stdio_bars(runs), false)?;
    let (bars, note) = sessions_and_cold_start(runs);
    bars_panel(&panels[3], "sessions and cold start (ms, log scale)", &bars, true)?;
    if let Some(note) = note {
        let (w, h) = panels[3].dim_in_pixel();
        panels[3].draw(&Text::new(note, (20, h as i32 - 26), (FONT, 17).into_font().color(&BLACK)))?;
        let _ = w;
    }
    root.present().with_context(|| format!("writing {}", png.display()))?;
    Ok(())
}

fn load_font() -> anyhow::Result<()> {
    let candidates: Vec<String> = match std::env::var("MCPX_BENCH_FONT") {
        Ok(path) => vec![path],
        Err(_) => FONT_PATHS.iter().map(|p| (*p).to_owned()).collect(),
    };
    for path in &candidates {
        if let Ok(bytes) = std::fs::read(path) {
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font(FONT, FontStyle::Normal, bytes)
                .map_err(|_| anyhow::anyhow!("{path} is not a usable TrueType font"))?;
            return Ok(());
        }
    }
    bail!(
        "no font to draw text with: tried {}; install fonts-dejavu-core or set MCPX_BENCH_FONT to a .ttf file",
        candidates.join(", ")
    )
}

fn draw_header(area: &Area<'_>, document: &Value) -> anyhow::Result<()> {
    let meta = &document["meta"];
    let machine = &document["machine"];
    let title = format!(
        "mcpx-bench · {} · commit {} · release build: {}",
        meta["date"].as_str().unwrap_or("?"),
        meta["commit"].as_str().unwrap_or("?"),
        document["binaries"]["debugBuild"] == false
    );
    let detail = format!(
        "{} × {} · Linux {} · load average before {} / after {} (shared machine) · every contender in front of the same fakemcp",
        machine["cpus"],
        machine["cpuModel"].as_str().unwrap_or("?"),
        machine["kernel"].as_str().unwrap_or("?"),
        machine["loadAverage"].as_str().unwrap_or("?"),
        machine["loadAverageAfter"].as_str().unwrap_or("?"),
    );
    area.draw(&Text::new(title, (20, 10), (FONT, 28).into_font().color(&BLACK)))?;
    area.draw(&Text::new(detail, (20, 44), (FONT, 18).into_font().color(&RGBColor(80, 80, 80))))?;
    Ok(())
}

/// One line per contender across the concurrency levels; `value` picks the figure.
fn http_panel(
    area: &Area<'_>,
    runs: &[&Value],
    title: &str,
    value: impl Fn(&Value) -> Option<f64>,
) -> anyhow::Result<()> {
    let levels: Vec<String> = runs.iter().map(|r| format!("{} clients", r["settings"]["clients"])).collect();
    let figures: Vec<(usize, &str, f64)> = runs
        .iter()
        .enumerate()
        .flat_map(|(i, run)| {
            run["contenders"].as_array().into_iter().flatten().filter_map(move |c| Some((i, c["name"].as_str()?, c)))
        })
        .filter_map(|(i, name, c)| Some((i, name, value(c)?)).filter(|(_, _, v)| *v > 0.0))
        .collect();
    if figures.is_empty() {
        return empty(area, title);
    }
    let (lo, hi) = log_bounds(figures.iter().map(|f| f.2));
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 22))
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d((0..levels.len().saturating_sub(1)).into_segmented(), (lo..hi).log_scale())?;
    chart
        .configure_mesh()
        .x_labels(levels.len() + 1)
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => levels.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .y_label_formatter(&|v| short_number(*v))
        .label_style((FONT, 17))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for &(name, colour) in SERIES {
        let points: Vec<(SegmentValue<usize>, f64)> =
            figures.iter().filter(|f| f.1 == name).map(|f| (SegmentValue::CenterOf(f.0), f.2)).collect();
        if points.is_empty() {
            continue;
        }
        let style = colour.stroke_width(3);
        chart
            .draw_series(LineSeries::new(points.clone(), style))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3)));
        chart.draw_series(points.iter().map(|p| Circle::new(p.clone(), 5, colour.filled())))?;
        chart.draw_series(points.iter().map(|p| {
            EmptyElement::at(p.clone()) + Text::new(short_number(p.1), (8, -20), (FONT, 15).into_font().color(&colour))
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .label_font((FONT, 17))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .draw()?;
    Ok(())
}

/// A labelled horizontal bar.
struct Bar {
    label: String,
    value: f64,
    colour: RGBColor,
}

fn stdio_bars(runs: &[Value]) -> Vec<Bar> {
    let mut bars = Vec::new();
    for run in runs.iter().filter(|r| r["scenario"] == "stdio-relay") {
        let era = run["settings"]["era"].as_str().unwrap_or("?");
        for c in run["contenders"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or("?");
            let colour = if name == "direct" { SERIES[0].1 } else { SERIES[2].1 };
            for p in ["p50", "p99"] {
                if let Some(value) = c["latencyMicros"][p].as_f64() {
                    bars.push(Bar { label: format!("{era} · {name} · {p}"), value, colour });
                }
            }
        }
        if let Some(added) = run["comparisons"][0]["addedMicros"]["p50"].as_f64() {
            bars.push(Bar {
                label: format!("{era} · added by mcpx at p50"),
                value: added,
                colour: RGBColor(255, 127, 14),
            });
        }
    }
    bars
}

/// Bars in milliseconds, and a line of memory figures from the sessions run.
fn sessions_and_cold_start(runs: &[Value]) -> (Vec<Bar>, Option<String>) {
    let mut bars = Vec::new();
    let mut note = None;
    for run in runs {
        let scenario = run["scenario"].as_str().unwrap_or_default();
        if scenario != "sessions" && scenario != "cold-start" {
            continue;
        }
        for c in run["contenders"].as_array().into_iter().flatten() {
            let name = c["name"].as_str().unwrap_or("?");
            let colour = match (scenario, name) {
                ("sessions", "new-session") => RGBColor(31, 119, 180),
                ("sessions", _) => RGBColor(44, 160, 44),
                (_, "fakemcp") => SERIES[0].1,
                _ => RGBColor(255, 127, 14),
            };
            let (label, points) = match scenario {
                "sessions" => (format!("session · {name}"), ["p50", "p99"]),
                _ => (format!("cold start · {name}"), ["p50", "max"]),
            };
            for p in points {
                if let Some(us) = c["latencyMicros"][p].as_f64() {
                    bars.push(Bar { label: format!("{label} · {p}"), value: us / 1000.0, colour });
                }
            }
        }
        if scenario == "sessions" {
            let facts = &run["facts"];
            let rss = &facts["rssKiB"];
            let mib = |v: &Value| v.as_f64().map_or("?".to_owned(), |k| format!("{:.1}", k / 1024.0));
            note = Some(format!(
                "{}/{} instances · daemon RSS {} → {} MiB all up → {} MiB reaped · {} KiB/idle instance",
                facts["instancesCreated"],
                facts["instancesExpected"],
                mib(&rss["baseline"]),
                mib(&rss["withAllInstances"]),
                mib(&rss["afterReap"]),
                facts["daemonKiBPerIdleInstance"],
            ));
        }
    }
    (bars, note)
}

fn bars_panel(area: &Area<'_>, title: &str, bars: &[Bar], log: bool) -> anyhow::Result<()> {
    if bars.is_empty() {
        return empty(area, title);
    }
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    // A discrete range includes its end: n rows are 0..n-1.
    let rows = (0..bars.len() - 1).into_segmented();
    let max = bars.iter().map(|b| b.value).fold(0.0, f64::max);
    let y_label = |v: &SegmentValue<usize>| match v {
        // Row 0 at the top.
        SegmentValue::CenterOf(i) => {
            labels.len().checked_sub(i + 1).and_then(|j| labels.get(j)).cloned().unwrap_or_default()
        }
        _ => String::new(),
    };
    let mut builder = ChartBuilder::on(area);
    builder.caption(title, (FONT, 22)).margin(15).margin_bottom(45).x_label_area_size(35).y_label_area_size(330);
    let row = |i: usize| bars.len() - 1 - i;
    let text = |b: &Bar| if log { short_number(b.value) } else { format!("{:.0}", b.value) };
    if log {
        let (lo, hi) = log_bounds(bars.iter().map(|b| b.value).filter(|v| *v > 0.0));
        let mut chart = builder.build_cartesian_2d((lo..hi).log_scale(), rows)?;
        chart
            .configure_mesh()
            .y_labels(bars.len() + 1)
            .y_label_formatter(&y_label)
            .x_label_formatter(&|v| short_number(*v))
            .label_style((FONT, 16))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new(
                [(lo, SegmentValue::Exact(row(i))), (b.value.max(lo), SegmentValue::Exact(row(i) + 1))],
                b.colour.filled(),
            );
            r.set_margin(4, 4, 0, 0);
            r
        }))?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            Text::new(format!(" {}", text(b)), (b.value.max(lo), SegmentValue::CenterOf(row(i))), (FONT, 15))
        }))?;
    } else {
        let mut chart = builder.build_cartesian_2d(0.0..max * 1.2, rows)?;
        chart
            .configure_mesh()
            .y_labels(bars.len() + 1)
            .y_label_formatter(&y_label)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .label_style((FONT, 16))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let mut r = Rectangle::new(
                [(0.0, SegmentValue::Exact(row(i))), (b.value, SegmentValue::Exact(row(i) + 1))],
                b.colour.filled(),
            );
            r.set_margin(4, 4, 0, 0);
            r
        }))?;
        chart.draw_series(
            bars.iter().enumerate().map(|(i, b)| {
                Text::new(format!(" {}", text(b)), (b.value, SegmentValue::CenterOf(row(i))), (FONT, 15))
            }),
        )?;
    }
    Ok(())
}

fn empty(area: &Area<'_>, title: &str) -> anyhow::Result<()> {
    area.draw(&Text::new(format!("{title}: not in this results file"), (20, 20), (FONT, 20)))?;
    Ok(())
}

/// Log-axis bounds around `values`: a decade-aligned floor and some room above.
fn log_bounds(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 {
        return (0.1, 10.0);
    }
    (10f64.powf(lo.log10().floor()), 10f64.powf((hi * 3.0).log10().ceil()))
}

/// 12345 → "12.3k", 0.25 → "0.25".
fn short_number(v: f64) -> String {
    match v {
        v if v >= 10_000.0 => format!("{:.1}k", v / 1000.0),
        v if v >= 100.0 => format!("{v:.0}"),
        v if v >= 1.0 => format!("{v:.1}"),
        v => format!("{v:.2}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_bounds_cover_every_value_on_decades() {
        assert_eq!(log_bounds([250.0, 13_000.0].into_iter()), (100.0, 100_000.0));
        assert_eq!(log_bounds(std::iter::empty()), (0.1, 10.0));
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(short_number(12_345.0), "12.3k");
        assert_eq!(short_number(450.0), "450");
        assert_eq!(short_number(2.345), "2.3");
        assert_eq!(short_number(0.25), "0.25");
    }
}
