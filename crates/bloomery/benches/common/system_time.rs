//! The system CPU time of this process, for `benches/compare.rs` and
//! `examples/fill_after.rs` (each includes this file with `#[path]`).

/// The system (kernel) CPU time this process has used, in ms: /proc/self/stat's `stime`
/// at the usual 100 ticks a second (NaN where it cannot be read).
pub fn system_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which may hold spaces) in parentheses: stime is
    // the 15th field of the line, the 13th after the parenthesis.
    stat.rsplit_once(')')
        .and_then(|(_, fields)| fields.split_whitespace().nth(12)?.parse::<f64>().ok())
        .map_or(f64::NAN, |ticks| ticks * 10.0)
}
