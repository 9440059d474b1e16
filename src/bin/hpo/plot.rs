//! `hpo plot`: SVG plots of a study, drawn with plotters' SVG backend.
//!
//! Every chart uses the same coordinate type: a linear `f64` axis with
//! explicit tick positions ([`Axis`]). A log parameter is drawn in log10
//! space with ticks at powers of ten (labelled in the parameter's units), a
//! categorical one at integer positions labelled with its choices. So one
//! drawing routine serves linear, log and categorical axes alike.
//!
//! What each kind draws, and the SVG elements a test can count:
//!
//! | kind | draws | one `<circle>` per |
//! | --- | --- | --- |
//! | history | objective per trial, best-so-far line | complete trial |
//! | slice | objective against each parameter, one panel per parameter | complete trial with that parameter, per panel |
//! | parallel-coordinate | one line per complete trial across parameter axes | complete trial (at the objective axis) |
//! | importance | PED-ANOVA importance per parameter, as bars | (none: one bar per parameter) |
//! | intermediate | learning curve per trial, pruned trials crossed out | trial with intermediate values (at its last step) |
//! | timeline | one bar per trial from start to end, coloured by state | (none: one bar per started trial) |
//! | memory | estimated and measured peak memory per trial | trial with a measured peak |

use crate::error::{CliError, Result};
use crate::open::StudyData;
use crate::study;
use hpo::distribution::Distribution;
use hpo::{FrozenTrial, TrialState};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;
use std::sync::Arc;

/// The plots `hpo plot` draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Objective value per trial and the best value so far.
    History,
    /// Objective value against each parameter.
    Slice,
    /// Every complete trial as a line across parameter axes.
    ParallelCoordinate,
    /// PED-ANOVA parameter importance.
    Importance,
    /// Learning curves (intermediate values), pruned trials marked.
    Intermediate,
    /// Trials over wall-clock time by state (shows parallelism).
    Timeline,
    /// Estimated against measured peak memory per trial.
    Memory,
}

impl Kind {
    /// Every kind, in report order.
    pub const ALL: [Kind; 7] = [
        Kind::History,
        Kind::Slice,
        Kind::ParallelCoordinate,
        Kind::Importance,
        Kind::Intermediate,
        Kind::Timeline,
        Kind::Memory,
    ];

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Kind::History => "history",
            Kind::Slice => "slice",
            Kind::ParallelCoordinate => "parallel-coordinate",
            Kind::Importance => "importance",
            Kind::Intermediate => "intermediate",
            Kind::Timeline => "timeline",
            Kind::Memory => "memory",
        }
    }
}

const W: u32 = 900;
const H: u32 = 540;
const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const RED: RGBColor = RGBColor(214, 39, 40);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const GREY: RGBColor = RGBColor(127, 127, 127);
const FONT: &str = "sans-serif";

/// The colour of a trial state.
pub fn state_color(s: TrialState) -> RGBColor {
    match s {
        TrialState::Complete => BLUE,
        TrialState::Pruned => ORANGE,
        TrialState::Fail => RED,
        TrialState::Running => GREEN,
        TrialState::Waiting => GREY,
    }
}

/// Draws one plot as an SVG document. A study without the data a plot
/// needs (no complete trial, no intermediate values, ...) is an error that
/// says what is missing.
pub fn draw(data: &StudyData, kind: Kind) -> Result<String> {
    let mut svg = String::new();
    {
        let (w, h) = size(data, kind);
        let root = SVGBackend::with_string(&mut svg, (w, h)).into_drawing_area();
        let r = (|| -> Result<()> {
            root.fill(&WHITE).map_err(|e| fail(kind, e))?;
            match kind {
                Kind::History => history(data, &root),
                Kind::Slice => slice(data, &root),
                Kind::ParallelCoordinate => parallel(data, &root),
                Kind::Importance => importance(data, &root),
                Kind::Intermediate => intermediate(data, &root),
                Kind::Timeline => timeline(data, &root),
                Kind::Memory => memory(data, &root),
            }?;
            root.present().map_err(|e| fail(kind, e))
        })();
        r?;
    }
    Ok(svg)
}

fn size(data: &StudyData, kind: Kind) -> (u32, u32) {
    match kind {
        Kind::Slice => {
            let n = study::param_names(data).len().max(1) as u32;
            let cols = n.min(3);
            let rows = n.div_ceil(cols);
            (cols * 380, rows * 320 + 40)
        }
        Kind::Timeline => (W, (6 * data.trials.len() as u32 + 150).clamp(H, 900)),
        _ => (W, H),
    }
}

fn fail(kind: Kind, e: impl std::fmt::Display) -> CliError {
    CliError::Plot {
        kind: kind.name().into(),
        reason: e.to_string(),
    }
}

fn no_data(kind: Kind, what: &str) -> CliError {
    CliError::Plot {
        kind: kind.name().into(),
        reason: what.into(),
    }
}

type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// An axis: a linear range in drawing units, tick positions and labels.
#[derive(Clone)]
pub struct Axis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    scale: Scale,
    desc: String,
}

#[derive(Clone)]
enum Scale {
    Linear,
    /// Drawn in log10 space.
    Log,
    /// Choice `i` at position `i`.
    Categorical(Vec<String>),
    /// Bytes, labelled in binary units.
    Bytes,
}

impl Axis {
    /// A linear axis over the values (padded by 5%).
    fn linear(values: impl IntoIterator<Item = f64>, desc: &str) -> Axis {
        let (lo, hi) = bounds(values);
        let (lo, hi) = pad(lo, hi);
        Axis {
            lo,
            hi,
            ticks: nice_ticks(lo, hi, 7),
            scale: Scale::Linear,
            desc: desc.into(),
        }
    }

    /// A log10 axis over the (positive) values.
    fn log(values: impl IntoIterator<Item = f64>, desc: &str) -> Axis {
        let (lo, hi) = bounds(values.into_iter().filter(|v| *v > 0.0).map(f64::log10));
        let (lo, hi) = pad(lo, hi);
        let mut ticks = Vec::new();
        for e in (lo.floor() as i32)..=(hi.ceil() as i32) {
            let mults: &[f64] = if hi - lo < 2.5 {
                &[1.0, 2.0, 5.0]
            } else {
                &[1.0]
            };
            for m in mults {
                let t = (m * 10f64.powi(e)).log10();
                if t >= lo && t <= hi {
                    ticks.push(t);
                }
            }
        }
        Axis {
            lo,
            hi,
            ticks,
            scale: Scale::Log,
            desc: desc.into(),
        }
    }

    fn categorical(choices: Vec<String>, desc: &str) -> Axis {
        let n = choices.len().max(1) as f64;
        Axis {
            lo: -0.5,
            hi: n - 0.5,
            ticks: (0..choices.len()).map(|i| i as f64).collect(),
            scale: Scale::Categorical(choices),
            desc: desc.into(),
        }
    }

    fn bytes(values: impl IntoIterator<Item = f64>, desc: &str) -> Axis {
        let mut a = Axis::linear(values, desc);
        a.lo = a.lo.max(0.0);
        let unit = 1024f64.powi(((a.hi.max(1.0)).log(1024.0).floor()) as i32);
        let ticks = nice_ticks(a.lo / unit, a.hi / unit, 7);
        a.ticks = ticks.into_iter().map(|t| t * unit).collect();
        a.scale = Scale::Bytes;
        a
    }

    /// The axis for a parameter: log, categorical or linear by its distribution.
    fn for_param(dist: &Distribution, values: &[f64], name: &str) -> Axis {
        match dist {
            Distribution::Float(f) if f.is_log() => {
                Axis::log(values.iter().copied().chain([f.low(), f.high()]), name)
            }
            Distribution::Int(i) if i.is_log() => Axis::log(
                values
                    .iter()
                    .copied()
                    .chain([i.low() as f64, i.high() as f64]),
                &format!("{name} (log)"),
            ),
            Distribution::Float(f) => {
                Axis::linear(values.iter().copied().chain([f.low(), f.high()]), name)
            }
            Distribution::Int(i) => Axis::linear(
                values
                    .iter()
                    .copied()
                    .chain([i.low() as f64, i.high() as f64]),
                name,
            ),
            Distribution::Categorical(c) => {
                Axis::categorical(c.choices().iter().map(choice_label).collect(), name)
            }
        }
    }

    /// Where a value (in the parameter's own units) is drawn.
    fn at(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Log => v.max(f64::MIN_POSITIVE).log10(),
            _ => v,
        }
    }

    fn label(&self, t: f64) -> String {
        match &self.scale {
            Scale::Linear => short(t),
            Scale::Log => short(10f64.powf(t)),
            Scale::Categorical(c) => {
                let i = t.round();
                if (t - i).abs() < 1e-6 && i >= 0.0 {
                    c.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
            Scale::Bytes => study::bytes(t),
        }
    }

    fn coord(&self) -> Ticked {
        Ticked {
            lo: self.lo,
            hi: self.hi,
            ticks: self.ticks.clone(),
        }
    }

    fn is_log(&self) -> bool {
        matches!(self.scale, Scale::Log)
    }
}

/// A linear `f64` coordinate with exactly the given ticks (plotters'
/// `WithKeyPoints` cannot take a label formatter for `f64`).
pub struct Ticked {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        if span <= 0.0 {
            return (limit.0 + limit.1) / 2;
        }
        let f = (v - self.lo) / span;
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// A choice as an axis label: strings bare, other values as printed.
fn choice_label(c: &hpo::Choice) -> String {
    c.as_str()
        .map(str::to_owned)
        .unwrap_or_else(|| c.to_string())
}

fn bounds(values: impl IntoIterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        (0.0, 1.0)
    } else {
        (lo, hi)
    }
}

fn pad(lo: f64, hi: f64) -> (f64, f64) {
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        let d = lo.abs().max(1.0) * 0.5;
        return (lo - d, hi + d);
    }
    let d = (hi - lo) * 0.05;
    (lo - d, hi + d)
}

/// About `n` round tick positions in `[lo, hi]`.
fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let span = hi - lo;
    if span <= 0.0 || !span.is_finite() {
        return vec![lo];
    }
    let raw = span / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= n as f64)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    (first..=last).map(|i| i as f64 * step).collect()
}

/// A short label for a number.
fn short(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    let a = x.abs();
    if !(1e-3..1e5).contains(&a) {
        let s = format!("{x:.1e}");
        return s.replace(".0e", "e");
    }
    let s = format!("{x:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

/// Draws axes (mesh and labels) and returns the chart to draw into.
fn chart<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    x: &Axis,
    y: &Axis,
    kind: Kind,
) -> Result<ChartContext<'a, SVGBackend<'b>, Cartesian2d<Ticked, Ticked>>> {
    let mut c = ChartBuilder::on(area)
        .caption(caption, (FONT, 20))
        .margin(12)
        .x_label_area_size(48)
        .y_label_area_size(72)
        .build_cartesian_2d(x.coord(), y.coord())
        .map_err(|e| fail(kind, e))?;
    let xf = |v: &f64| x.label(*v);
    let yf = |v: &f64| y.label(*v);
    c.configure_mesh()
        .x_desc(x.desc.clone())
        .y_desc(y.desc.clone())
        .x_label_formatter(&xf)
        .y_label_formatter(&yf)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(|e| fail(kind, e))?;
    Ok(c)
}

fn objective_name(data: &StudyData) -> String {
    match data.directions.len() {
        0 | 1 => "objective".into(),
        _ => "objective 0".into(),
    }
}

fn objective_axis(data: &StudyData, values: &[f64]) -> Axis {
    let name = objective_name(data);
    let positive = values.iter().all(|v| *v > 0.0);
    let (lo, hi) = bounds(values.iter().copied());
    if positive && lo > 0.0 && hi / lo > 1e3 {
        Axis::log(values.iter().copied(), &format!("{name} (log)"))
    } else {
        Axis::linear(values.iter().copied(), &name)
    }
}

fn first_value(t: &FrozenTrial) -> Option<f64> {
    t.values
        .as_ref()
        .and_then(|v| v.first().copied())
        .filter(|v| v.is_finite())
}

fn complete_with_value(data: &StudyData) -> Vec<(&Arc<FrozenTrial>, f64)> {
    study::complete(data)
        .filter_map(|t| Some((t, first_value(t)?)))
        .collect()
}

fn history(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::History;
    let pts = complete_with_value(data);
    if pts.is_empty() {
        return Err(no_data(k, "the study has no complete trial yet"));
    }
    let dir = data
        .directions
        .first()
        .copied()
        .unwrap_or(hpo::Direction::Minimize);
    let x = Axis::linear(pts.iter().map(|(t, _)| t.number as f64), "trial");
    let values: Vec<f64> = pts.iter().map(|(_, v)| *v).collect();
    let y = objective_axis(data, &values);
    let caption = format!(
        "Optimization history ({})",
        format!("{dir:?}").to_lowercase()
    );
    let mut c = chart(area, &caption, &x, &y, k)?;
    let mut best: Option<f64> = None;
    let mut line = Vec::new();
    for (t, v) in &pts {
        if best.is_none_or(|b| study::better(dir, *v, b)) {
            best = Some(*v);
        }
        if let Some(b) = best {
            if let Some((_, prev)) = line.last().copied() {
                line.push((t.number as f64, prev));
            }
            line.push((t.number as f64, y.at(b)));
        }
    }
    c.draw_series(LineSeries::new(line, RED.stroke_width(2)))
        .map_err(|e| fail(k, e))?
        .label("best so far")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], RED.stroke_width(2)));
    c.draw_series(
        pts.iter()
            .map(|(t, v)| Circle::new((t.number as f64, y.at(*v)), 3, BLUE.mix(0.7).filled())),
    )
    .map_err(|e| fail(k, e))?
    .label("objective value")
    .legend(|(x, y)| Rectangle::new([(x + 5, y - 4), (x + 13, y + 4)], BLUE.filled()));
    c.configure_series_labels()
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.3))
        .label_font((FONT, 13))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(|e| fail(k, e))
}

fn slice(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::Slice;
    let pts = complete_with_value(data);
    let names = study::param_names(data);
    if pts.is_empty() || names.is_empty() {
        return Err(no_data(
            k,
            "the study has no complete trial with parameters yet",
        ));
    }
    let values: Vec<f64> = pts.iter().map(|(_, v)| *v).collect();
    let y = objective_axis(data, &values);
    let cols = names.len().min(3);
    let rows = names.len().div_ceil(cols);
    let (title, body) = area.split_vertically(40);
    title
        .draw(&Text::new(
            "Objective value per parameter (slice)",
            (12, 10),
            (FONT, 20).into_font(),
        ))
        .map_err(|e| fail(k, e))?;
    let panels = body.split_evenly((rows, cols));
    let n = pts.len().max(1) as f64;
    for (name, panel) in names.iter().zip(panels.iter()) {
        let with: Vec<(&Arc<FrozenTrial>, f64, f64)> = pts
            .iter()
            .filter_map(|(t, v)| Some((*t, t.internal_params.get(name).copied()?, *v)))
            .collect();
        let Some(dist) = with
            .iter()
            .find_map(|(t, _, _)| t.distributions.get(name))
            .cloned()
        else {
            continue;
        };
        let xs: Vec<f64> = with.iter().map(|(_, x, _)| *x).collect();
        let x = Axis::for_param(&dist, &xs, name);
        let mut c = chart(panel, "", &x, &y, k)?;
        c.draw_series(with.iter().map(|(t, px, v)| {
            // Later trials darker: the sampler's focus shows.
            let shade = 0.35 + 0.65 * (t.number as f64 / n).min(1.0);
            Circle::new((x.at(*px), y.at(*v)), 3, BLUE.mix(shade).filled())
        }))
        .map_err(|e| fail(k, e))?;
    }
    Ok(())
}

fn parallel(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::ParallelCoordinate;
    let pts = complete_with_value(data);
    let names = study::param_names(data);
    if pts.is_empty() || names.is_empty() {
        return Err(no_data(
            k,
            "the study has no complete trial with parameters yet",
        ));
    }
    let dir = data
        .directions
        .first()
        .copied()
        .unwrap_or(hpo::Direction::Minimize);
    let values: Vec<f64> = pts.iter().map(|(_, v)| *v).collect();
    let mut axes = vec![objective_axis(data, &values)];
    for name in &names {
        let xs: Vec<f64> = pts
            .iter()
            .filter_map(|(t, _)| t.internal_params.get(name).copied())
            .collect();
        let dist = pts.iter().find_map(|(t, _)| t.distributions.get(name));
        axes.push(match dist {
            Some(d) => Axis::for_param(d, &xs, name),
            None => Axis::linear(xs, name),
        });
    }
    let m = axes.len();
    let labels: Vec<String> = axes.iter().map(|a| a.desc.clone()).collect();
    let x = Axis {
        lo: -0.3,
        hi: m as f64 - 0.5,
        ticks: (0..m).map(|i| i as f64).collect(),
        scale: Scale::Categorical(labels),
        desc: String::new(),
    };
    let y = Axis {
        lo: -0.06,
        hi: 1.06,
        ticks: Vec::new(),
        scale: Scale::Linear,
        desc: String::new(),
    };
    let mut c = chart(area, "Parallel coordinates (darker = better)", &x, &y, k)?;
    let norm = |a: &Axis, v: f64| {
        let p = a.at(v);
        let (lo, hi) = (a.lo, a.hi);
        if hi > lo {
            (p - lo) / (hi - lo)
        } else {
            0.5
        }
    };
    let (vlo, vhi) = bounds(values.iter().copied());
    let rank = |v: f64| {
        let r = if vhi > vlo {
            (v - vlo) / (vhi - vlo)
        } else {
            0.5
        };
        match dir {
            hpo::Direction::Minimize => 1.0 - r,
            hpo::Direction::Maximize => r,
        }
    };
    // Worst first, so the best lines are drawn on top.
    let mut order: Vec<&(&Arc<FrozenTrial>, f64)> = pts.iter().collect();
    order.sort_by(|a, b| rank(a.1).total_cmp(&rank(b.1)));
    for (t, v) in &order {
        let mut line = vec![(0.0, norm(&axes[0], *v))];
        for (i, name) in names.iter().enumerate() {
            if let Some(p) = t.internal_params.get(name) {
                line.push(((i + 1) as f64, norm(&axes[i + 1], *p)));
            }
        }
        let r = rank(*v);
        let color = RGBColor(
            (230.0 - 200.0 * r) as u8,
            (230.0 - 130.0 * r) as u8,
            (240.0 - 60.0 * r) as u8,
        );
        c.draw_series(std::iter::once(PathElement::new(
            line,
            color.mix(0.5 + 0.5 * r).stroke_width(1),
        )))
        .map_err(|e| fail(k, e))?;
    }
    c.draw_series(
        order
            .iter()
            .map(|(_, v)| Circle::new((0.0, norm(&axes[0], *v)), 2, BLACK.mix(0.6).filled())),
    )
    .map_err(|e| fail(k, e))?;
    // Each axis: a vertical rule and its low and high labels.
    for (i, a) in axes.iter().enumerate() {
        let xi = i as f64;
        c.draw_series(std::iter::once(Rectangle::new(
            [(xi - 0.002, 0.0), (xi + 0.002, 1.0)],
            BLACK.mix(0.5).filled(),
        )))
        .map_err(|e| fail(k, e))?;
        let ticks: Vec<f64> = match &a.scale {
            Scale::Categorical(_) => a.ticks.clone(),
            _ => {
                let inner: Vec<f64> = a
                    .ticks
                    .iter()
                    .copied()
                    .filter(|t| *t >= a.lo && *t <= a.hi)
                    .collect();
                if inner.len() >= 2 {
                    vec![inner[0], inner[inner.len() - 1]]
                } else {
                    inner
                }
            }
        };
        for t in ticks {
            let yy = if a.hi > a.lo {
                (t - a.lo) / (a.hi - a.lo)
            } else {
                0.5
            };
            c.draw_series(std::iter::once(Text::new(
                a.label(t),
                (xi + 0.02, yy),
                (FONT, 12).into_font(),
            )))
            .map_err(|e| fail(k, e))?;
        }
    }
    Ok(())
}

fn importance(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::Importance;
    let imp = crate::importance::importances(data);
    if imp.is_empty() || study::complete(data).count() < 2 {
        return Err(no_data(
            k,
            "importance needs at least 2 complete trials with parameters",
        ));
    }
    let n = imp.len();
    // Most important on top.
    let names: Vec<String> = imp.iter().rev().map(|(n, _)| n.clone()).collect();
    let y = Axis::categorical(names, "");
    let x = Axis {
        lo: 0.0,
        hi: 1.12,
        ticks: nice_ticks(0.0, 1.0, 5),
        scale: Scale::Linear,
        desc: "importance (PED-ANOVA, top 10% vs all, normalised)".into(),
    };
    let mut c = chart(area, "Parameter importance", &x, &y, k)?;
    for (i, (_, v)) in imp.iter().rev().enumerate() {
        let yi = i as f64;
        c.draw_series(std::iter::once(Rectangle::new(
            [(0.0, yi - 0.3), (*v, yi + 0.3)],
            BLUE.filled(),
        )))
        .map_err(|e| fail(k, e))?;
        c.draw_series(std::iter::once(Text::new(
            format!("{v:.3}"),
            (*v + 0.01, yi + 0.1),
            (FONT, 13).into_font(),
        )))
        .map_err(|e| fail(k, e))?;
    }
    let _ = n;
    Ok(())
}

fn intermediate(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::Intermediate;
    let curves: Vec<&Arc<FrozenTrial>> = data
        .trials
        .iter()
        .filter(|t| !t.intermediate_values.is_empty())
        .collect();
    if curves.is_empty() {
        return Err(no_data(
            k,
            "no trial reported intermediate values (trial.report(step, value))",
        ));
    }
    let steps = curves
        .iter()
        .flat_map(|t| t.intermediate_values.keys().map(|s| *s as f64));
    let x = Axis::linear(steps, "step");
    let vals: Vec<f64> = curves
        .iter()
        .flat_map(|t| t.intermediate_values.values().copied())
        .filter(|v| v.is_finite())
        .collect();
    let mut y = objective_axis(data, &vals);
    y.desc = "intermediate value".into();
    if y.is_log() {
        y.desc.push_str(" (log)");
    }
    let mut c = chart(
        area,
        "Learning curves (x = pruned, o = last step)",
        &x,
        &y,
        k,
    )?;
    for t in &curves {
        let color = state_color(t.state);
        let line: Vec<(f64, f64)> = t
            .intermediate_values
            .iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(s, v)| (*s as f64, y.at(*v)))
            .collect();
        let Some(last) = line.last().copied() else {
            continue;
        };
        c.draw_series(LineSeries::new(line, color.mix(0.7).stroke_width(1)))
            .map_err(|e| fail(k, e))?;
        c.draw_series(std::iter::once(Circle::new(last, 3, color.filled())))
            .map_err(|e| fail(k, e))?;
        if t.state == TrialState::Pruned {
            c.draw_series(std::iter::once(Cross::new(last, 6, RED.stroke_width(2))))
                .map_err(|e| fail(k, e))?;
        }
    }
    for (i, st) in [
        TrialState::Complete,
        TrialState::Pruned,
        TrialState::Running,
        TrialState::Fail,
    ]
    .iter()
    .enumerate()
    {
        area.draw(&Text::new(
            st.as_str().to_lowercase(),
            (100 + 110 * i as i32, 40),
            (FONT, 14).into_font().color(&state_color(*st)),
        ))
        .map_err(|e| fail(k, e))?;
    }
    Ok(())
}

fn timeline(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::Timeline;
    let now = chrono::Utc::now();
    let bars: Vec<(&Arc<FrozenTrial>, f64, f64)> = {
        let t0 = data.trials.iter().filter_map(|t| t.datetime_start).min();
        let Some(t0) = t0 else {
            return Err(no_data(k, "no trial has started yet"));
        };
        let secs = |d: chrono::DateTime<chrono::Utc>| (d - t0).num_milliseconds() as f64 / 1000.0;
        data.trials
            .iter()
            .filter_map(|t| {
                let s = t.datetime_start?;
                let e = t
                    .datetime_complete
                    .unwrap_or(if t.state == TrialState::Running {
                        now
                    } else {
                        s
                    });
                Some((t, secs(s), secs(e)))
            })
            .collect()
    };
    let span = bars.iter().map(|(_, _, e)| *e).fold(0.0, f64::max);
    let (unit, unit_name) = if span > 7200.0 {
        (3600.0, "hours")
    } else if span > 120.0 {
        (60.0, "minutes")
    } else {
        (1.0, "seconds")
    };
    let x = Axis::linear(
        bars.iter().flat_map(|(_, s, e)| [*s / unit, *e / unit]),
        &format!("wall time since the first trial started ({unit_name})"),
    );
    let mut y = Axis::linear(bars.iter().map(|(t, _, _)| t.number as f64), "trial");
    y.ticks.retain(|t| t.fract() == 0.0);
    let mut c = chart(
        area,
        "Timeline (overlapping bars = trials run in parallel)",
        &x,
        &y,
        k,
    )?;
    let min_w = (x.hi - x.lo) * 0.002;
    for (t, s, e) in &bars {
        let (s, e) = (*s / unit, (*e / unit).max(*s / unit + min_w));
        let yy = t.number as f64;
        c.draw_series(std::iter::once(Rectangle::new(
            [(s, yy - 0.4), (e, yy + 0.4)],
            state_color(t.state).filled(),
        )))
        .map_err(|e| fail(k, e))?;
    }
    for (i, st) in study::STATES.iter().enumerate() {
        area.draw(&Text::new(
            st.as_str().to_lowercase(),
            (100 + 110 * i as i32, 40),
            (FONT, 14).into_font().color(&state_color(*st)),
        ))
        .map_err(|e| fail(k, e))?;
    }
    Ok(())
}

fn memory(data: &StudyData, area: &Area) -> Result<()> {
    let k = Kind::Memory;
    let rows: Vec<(&Arc<FrozenTrial>, Option<f64>, Option<f64>)> = data
        .trials
        .iter()
        .map(|t| (t, study::estimated_peak(t), study::measured_peak(t)))
        .filter(|(_, e, m)| e.is_some() || m.is_some())
        .collect();
    if rows.is_empty() {
        return Err(no_data(
            k,
            "no trial recorded memory (user attributes estimated_peak_bytes, peak_device_bytes, peak_rss_bytes or device_used_bytes)",
        ));
    }
    let x = Axis::linear(rows.iter().map(|(t, _, _)| t.number as f64), "trial");
    let y = Axis::bytes(
        rows.iter()
            .flat_map(|(_, e, m)| [*e, *m])
            .flatten()
            .chain([0.0]),
        "peak memory",
    );
    // Say which measured figure the dots are.
    let mut sources: Vec<&str> = rows
        .iter()
        .filter_map(|(t, _, _)| study::measured_peak_with_source(t).map(|(_, s)| s))
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let title = format!(
        "Peak memory per trial: estimated (triangle) vs measured (dot: {})",
        if sources.is_empty() {
            "none".to_owned()
        } else {
            sources.join(", ")
        }
    );
    let mut c = chart(area, &title, &x, &y, k)?;
    c.draw_series(rows.iter().filter_map(|(t, e, _)| {
        Some(TriangleMarker::new(
            (t.number as f64, (*e)?),
            5,
            ORANGE.filled(),
        ))
    }))
    .map_err(|e| fail(k, e))?;
    c.draw_series(rows.iter().filter_map(|(t, _, m)| {
        Some(Circle::new(
            (t.number as f64, (*m)?),
            3,
            state_color(t.state).filled(),
        ))
    }))
    .map_err(|e| fail(k, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_inside() {
        let t = nice_ticks(0.0, 1.0, 5);
        let want = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];
        assert_eq!(t.len(), want.len(), "{t:?}");
        assert!(
            t.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12),
            "{t:?}"
        );
        let t = nice_ticks(-0.3, 7.3, 7);
        assert!(t.iter().all(|x| (-0.3..=7.3).contains(x)), "{t:?}");
    }

    #[test]
    fn log_axes_tick_at_powers_of_ten() {
        let a = Axis::log([1e-5, 1e-1], "lr");
        let labels: Vec<String> = a.ticks.iter().map(|t| a.label(*t)).collect();
        assert!(labels.contains(&"1e-5".to_string()), "{labels:?}");
        assert!(labels.contains(&"0.001".to_string()), "{labels:?}");
        assert!(labels.contains(&"0.1".to_string()), "{labels:?}");
    }

    #[test]
    fn categorical_axes_label_choices() {
        let a = Axis::categorical(vec!["relu".into(), "gelu".into()], "act");
        assert_eq!(a.label(0.0), "relu");
        assert_eq!(a.label(1.0), "gelu");
        assert_eq!(a.label(0.5), "");
    }
}
