//! upstream-fastcdc cuts a file with the v2020 chunker of the Rust crate
//! `fastcdc` (pinned to 5.0.0 in Cargo.toml and Cargo.lock), whose cut points
//! chunkd's fastcdc reproduces byte for byte, so that tests and benchmarks can
//! hold chunkd to it. Usage:
//!
//!     upstream-fastcdc [-algorithm fastcdc] [-min N] [-avg N] [-max N]
//!         [-level L] [-seed N] FILE|-
//!     upstream-fastcdc [...] -bench [-repeat N] [-seconds S] FILE
//!
//! The first form prints one "offset,length" line per chunk, the output of
//! `chunkctl chunk --fingerprint none`. The second reads FILE into memory,
//! chunks it from memory with `v2020::FastCDC::with_level_and_seed` at least
//! N times (default 3) and until S seconds (default 0) have passed, as
//! `chunkctl bench --seconds` repeats, and prints one JSON line with the
//! fastest run, as `upstream-chunk -bench` does (tests/upstream):
//! {"algorithm","bytes","chunks","best_seconds","gb_per_s"}.
//!
//! Unset parameters take chunkd's fastcdc defaults (min 4096, avg 16384, max
//! 65536, level 1, seed 0). Flags may be spelled -flag or --flag; -algorithm
//! takes only fastcdc (it is there so that callers of upstream-chunk can call
//! this the same way). Sizes
//! outside the crate's bounds, or odd (5.0.0 requires even sizes: its
//! two-byte scan would shift an odd bound by one), are usage errors (exit
//! status 2); the crate checks them only in debug builds.

use std::fs;
use std::hint::black_box;
use std::io::{self, BufWriter, Read, Write};
use std::process::ExitCode;
use std::time::Instant;

use fastcdc::v2020::{self, FastCDC, Normalization};

/// The chunker's parameters, in chunkd's terms.
#[derive(Clone, Copy, Debug)]
struct Params {
    min: usize,
    avg: usize,
    max: usize,
    level: u32,
    seed: u64,
}

/// chunkd's fastcdc defaults (server/chunking/limits.h).
const DEFAULTS: Params = Params {
    min: 4096,
    avg: 16384,
    max: 65536,
    level: 1,
    seed: 0,
};

/// A parsed command line.
struct Config {
    params: Params,
    bench: bool,
    repeat: usize,
    seconds: f64,
    path: String,
}

/// Why the program stops: the caller's mistake (exit status 2) or a failure
/// (exit status 1).
enum Failure {
    Usage(String),
    Other(String),
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::Other(e.to_string())
    }
}

const USAGE: &str = "usage: upstream-fastcdc [-algorithm fastcdc] [-min N] [-avg N] [-max N] \
                     [-level 0..3] [-seed N] [-bench [-repeat N] [-seconds S]] FILE|-";

/// The longest -seconds, as for `chunkctl bench`.
const MAX_SECONDS: f64 = 3600.0;

fn parse_number(flag: &str, value: Option<String>) -> Result<u64, Failure> {
    let text = value.ok_or_else(|| Failure::Usage(format!("-{flag}: expected a value")))?;
    text.parse::<u64>().map_err(|_| {
        Failure::Usage(format!(
            "-{flag}: expected a non-negative integer, got {text:?}"
        ))
    })
}

fn parse_args(args: Vec<String>) -> Result<Config, Failure> {
    let mut params = DEFAULTS;
    let mut bench = false;
    let mut repeat = 3usize;
    let mut seconds = 0.0f64;
    let mut paths = Vec::new();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let flag = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'));
        let flag = match flag {
            Some(name) if !name.is_empty() => name.to_owned(),
            _ => {
                paths.push(arg);
                continue;
            }
        };
        let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        match flag.as_str() {
            "min" => params.min = as_usize(parse_number(&flag, args.next())?),
            "avg" => params.avg = as_usize(parse_number(&flag, args.next())?),
            "max" => params.max = as_usize(parse_number(&flag, args.next())?),
            "level" => {
                let level = parse_number(&flag, args.next())?;
                params.level = u32::try_from(level).unwrap_or(u32::MAX);
            }
            "seed" => params.seed = parse_number(&flag, args.next())?,
            "repeat" => repeat = as_usize(parse_number(&flag, args.next())?),
            "seconds" => {
                let text = args.next().unwrap_or_default();
                seconds = match text.parse::<f64>() {
                    Ok(s) if (0.0..=MAX_SECONDS).contains(&s) => s,
                    _ => {
                        return Err(Failure::Usage(format!(
                            "-seconds: expected 0..{MAX_SECONDS}, got {text:?}"
                        )));
                    }
                };
            }
            "algorithm" => {
                let name = args.next().unwrap_or_default();
                if name != "fastcdc" {
                    return Err(Failure::Usage(format!(
                        "-algorithm: only fastcdc, got {name:?}"
                    )));
                }
            }
            "bench" => bench = true,
            _ => return Err(Failure::Usage(format!("unknown flag {arg:?}"))),
        }
    }
    if paths.len() != 1 {
        return Err(Failure::Usage(format!(
            "expected one FILE (or - for standard input), got {} arguments",
            paths.len()
        )));
    }
    if repeat < 1 {
        return Err(Failure::Usage("-repeat: expected at least 1".to_owned()));
    }
    let path = paths.pop().unwrap_or_default();
    if bench && path == "-" {
        return Err(Failure::Usage(
            "-bench needs a FILE, not standard input".to_owned(),
        ));
    }
    validate(&params)?;
    Ok(Config {
        params,
        bench,
        repeat,
        seconds,
        path,
    })
}

/// Refuses what the crate would not chunk as documented: it checks its
/// bounds and the even sizes only with debug assertions.
fn validate(p: &Params) -> Result<(), Failure> {
    let bounds = [
        ("min", p.min, v2020::MINIMUM_MIN, v2020::MINIMUM_MAX),
        ("avg", p.avg, v2020::AVERAGE_MIN, v2020::AVERAGE_MAX),
        ("max", p.max, v2020::MAXIMUM_MIN, v2020::MAXIMUM_MAX),
    ];
    for (name, value, low, high) in bounds {
        if value < low || value > high {
            return Err(Failure::Usage(format!(
                "-{name}: expected {low}..{high}, got {value}"
            )));
        }
        if value % 2 != 0 {
            return Err(Failure::Usage(format!(
                "-{name}: fastcdc 5.0.0 needs even sizes, got {value}"
            )));
        }
    }
    if p.level > 3 {
        return Err(Failure::Usage(format!(
            "-level: expected 0..3, got {}",
            p.level
        )));
    }
    Ok(())
}

fn normalization(level: u32) -> Normalization {
    match level {
        0 => Normalization::Level0,
        1 => Normalization::Level1,
        2 => Normalization::Level2,
        _ => Normalization::Level3,
    }
}

fn chunker<'a>(p: &Params, data: &'a [u8]) -> FastCDC<'a> {
    FastCDC::with_level_and_seed(data, p.min, p.avg, p.max, normalization(p.level), p.seed)
}

fn print_chunks(p: &Params, data: &[u8]) -> io::Result<()> {
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    for chunk in chunker(p, data) {
        writeln!(out, "{},{}", chunk.offset, chunk.length)?;
    }
    out.flush()
}

/// Chunks `data` at least `repeat` times and until `seconds` have passed,
/// and prints the fastest run as JSON. Every run must give the same chunks
/// (count and bytes covered): the crate is deterministic, so a difference is
/// a bug worth stopping for.
fn bench(p: &Params, data: &[u8], repeat: usize, seconds: f64) -> Result<(), Failure> {
    let mut best = f64::INFINITY;
    let mut chunks = 0usize;
    let begin = Instant::now();
    let mut run = 0usize;
    while run < repeat || begin.elapsed().as_secs_f64() < seconds {
        let start = Instant::now();
        let mut count = 0usize;
        let mut covered = 0usize;
        for chunk in chunker(p, black_box(data)) {
            count += 1;
            covered += chunk.length;
        }
        let elapsed = start.elapsed().as_secs_f64();
        black_box(covered);
        if covered != data.len() {
            return Err(Failure::Other(format!(
                "run {run}: the chunks cover {covered} of {} bytes",
                data.len()
            )));
        }
        if run > 0 && count != chunks {
            return Err(Failure::Other(format!(
                "run {run} gave {count} chunks, run 0 gave {chunks}"
            )));
        }
        chunks = count;
        best = best.min(elapsed);
        run += 1;
    }
    let gb_per_s = if best > 0.0 {
        data.len() as f64 / best / 1e9
    } else {
        0.0
    };
    println!(
        "{{\"algorithm\":\"fastcdc\",\"bytes\":{},\"chunks\":{},\"best_seconds\":{},\"gb_per_s\":{}}}",
        data.len(),
        chunks,
        best,
        gb_per_s
    );
    Ok(())
}

fn run(args: Vec<String>) -> Result<(), Failure> {
    let config = parse_args(args)?;
    let data = if config.path == "-" {
        let mut data = Vec::new();
        io::stdin().lock().read_to_end(&mut data)?;
        data
    } else {
        fs::read(&config.path).map_err(|e| Failure::Other(format!("{}: {e}", config.path)))?
    };
    if config.bench {
        bench(&config.params, &data, config.repeat, config.seconds)
    } else {
        Ok(print_chunks(&config.params, &data)?)
    }
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("upstream-fastcdc: {message}\n{USAGE}");
            ExitCode::from(2)
        }
        Err(Failure::Other(message)) => {
            eprintln!("upstream-fastcdc: {message}");
            ExitCode::from(1)
        }
    }
}
