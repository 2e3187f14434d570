//! The `bloomery` binary, end to end: every subcommand, every bad input, crashes and
//! concurrent writers, on real files.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command as StdCommand, Stdio};
use std::time::Duration;

use assert_cmd::Command;
use tempfile::TempDir;

fn bloomery() -> Command {
    Command::cargo_bin("bloomery").expect("the binary is built")
}

fn stdout_of(command: &mut Command) -> String {
    let output = command.output().expect("runs");
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8 output")
}

/// Runs a command that must fail with status 2 and one line on stderr; returns that line.
fn error_of(command: &mut Command) -> String {
    let output = command.output().expect("runs");
    assert_eq!(
        output.status.code(),
        Some(2),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8(output.stderr).expect("UTF-8");
    assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr}");
    assert!(stderr.starts_with("bloomery: "), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
    stderr.trim_end().to_string()
}

fn create(dir: &TempDir, name: &str, variant: &str, items: u64) -> PathBuf {
    let path = dir.path().join(name);
    bloomery()
        .args([
            "create",
            "--variant",
            variant,
            "--items",
            &items.to_string(),
            "--fpp",
            "0.01",
        ])
        .arg(&path)
        .assert()
        .success();
    path
}

fn lines(prefix: &str, count: usize) -> String {
    (0..count).map(|i| format!("{prefix}{i}\n")).collect()
}

/// `bloomery add PATH` of `lines(prefix, count)` from standard input.
fn add_lines(path: &Path, prefix: &str, count: usize) {
    bloomery()
        .arg("add")
        .arg(path)
        .write_stdin(lines(prefix, count))
        .assert()
        .success();
}

/// `bloomery check -q -i - PATH` of `items`: succeeds only when every item is present.
fn check_all(path: &Path, items: String) {
    bloomery()
        .args(["check", "-q", "-i", "-"])
        .arg(path)
        .write_stdin(items)
        .assert()
        .success();
}

const VARIANTS: [&str; 8] = [
    "classic",
    "blocked",
    "counting",
    "scalable",
    "retouched",
    "allowlisted",
    "rotating",
    "split-block",
];

/// `create` of a variant updated in place writes the library's empty file (header, then a
/// hole) without building the filter: the same bytes as the envelope of the filter built
/// in memory, which it wrote before, for every such variant and hashing.
#[test]
fn create_writes_the_bytes_of_the_filter_built_in_memory() {
    use bloomery::any::{self, Spec};
    use bloomery::format::native::Variant;
    let dir = TempDir::new().unwrap();
    let cases: [(&str, &[&str]); 5] = [
        ("classic", &[]),
        ("blocked", &[]),
        ("blocked", &["--seed", "7"]),
        ("split-block", &[]),
        ("split-block", &["--hash", "xxh3", "--seed", "7"]),
    ];
    for (index, (variant, options)) in cases.into_iter().enumerate() {
        for (items, fpp) in [(1u64, 0.5), (5_000, 0.001)] {
            let path = dir.path().join(format!("{index}-{items}.bloom"));
            bloomery()
                .args(["create", "--variant", variant, "--items", &items.to_string()])
                .args(["--fpp", &fpp.to_string()])
                .args(options)
                .arg(&path)
                .assert()
                .success();
            let mut spec = Spec::new(Variant::from_name(variant).unwrap(), items, fpp);
            if options.contains(&"--seed") {
                spec.seed = 7;
            }
            spec.split_block_parquet = !options.contains(&"xxh3");
            let built = any::create(&spec).unwrap().envelope().to_vec();
            assert!(fs::read(&path).unwrap() == built, "{variant} {options:?} {items}");
        }
    }
}

/// The space check's refusal names the variant with its article ("a allowlisted filter"
/// before).
#[test]
fn a_refused_filter_is_named_with_its_article() {
    let dir = TempDir::new().unwrap();
    for (variant, named) in [
        ("allowlisted", "an allowlisted filter"),
        ("counting", "a counting filter"),
    ] {
        let message = error_of(
            bloomery()
                .args([
                    "create",
                    "--variant",
                    variant,
                    "--items",
                    "1000000",
                    "--max-bytes",
                    "1000",
                ])
                .arg(dir.path().join("refused.bloom")),
        );
        assert!(
            message.starts_with(&format!("bloomery: {named} for 1000000 items")),
            "{message}"
        );
    }
}

#[test]
fn create_add_and_check_for_every_variant() {
    let dir = TempDir::new().unwrap();
    for variant in VARIANTS {
        let path = create(&dir, &format!("{variant}.bloom"), variant, 1000);
        bloomery()
            .arg("add")
            .arg(&path)
            .args(["apple", "banana"])
            .assert()
            .success();
        bloomery()
            .arg("add")
            .arg(&path)
            .write_stdin("cherry\r\ndate\n")
            .assert()
            .success();
        let out = stdout_of(
            bloomery()
                .arg("check")
                .arg(&path)
                .args(["apple", "cherry", "date"]),
        );
        assert_eq!(
            out,
            "probably present\tapple\nprobably present\tcherry\nprobably present\tdate\n"
        );
        let output = bloomery()
            .arg("check")
            .arg(&path)
            .args(["apple", "zucchini"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(1));
        assert_eq!(
            String::from_utf8_lossy(&output.stdout),
            "probably present\tapple\nabsent\tzucchini\n"
        );
        bloomery()
            .arg("check")
            .arg("--quiet")
            .arg(&path)
            .arg("banana")
            .assert()
            .success()
            .stdout("");
    }
}

#[test]
fn a_filter_for_zero_items_is_refused_or_usable_never_unreadable() {
    // `--items 0` once made a blocked file (the default variant) that nothing could open.
    let dir = TempDir::new().unwrap();
    for variant in VARIANTS.into_iter().chain(["redisbloom"]) {
        let path = dir.path().join(format!("{variant}.bloom"));
        let output = bloomery()
            .args(["create", "--variant", variant, "--items", "0"])
            .arg(&path)
            .output()
            .unwrap();
        if !output.status.success() {
            // Refused by the option's name (the library's refusal named capacity or
            // items_per_generation), for the kinds whose parts it sizes.
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                stderr.contains(&format!("--items must be at least 1 for {variant} filters")),
                "{variant}: {stderr}"
            );
            assert!(
                ["scalable", "scalable-blocked", "redisbloom", "rotating"].contains(&variant),
                "{variant}: {stderr}"
            );
            assert!(!path.exists(), "{variant}");
            continue;
        }
        bloomery().arg("add").arg(&path).arg("apple").assert().success();
        bloomery().arg("verify").arg(&path).assert().success();
        check_all(&path, "apple\n".into());
    }
}

#[test]
fn add_reads_items_from_files_and_stdin() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "f.bloom", "blocked", 10_000);
    let list = dir.path().join("list.txt");
    fs::write(&list, lines("file-", 500)).unwrap();
    bloomery()
        .arg("add")
        .arg(&path)
        .arg("-i")
        .arg(&list)
        .assert()
        .success();
    let check = dir.path().join("check.txt");
    fs::write(&check, lines("file-", 500)).unwrap();
    bloomery()
        .arg("check")
        .arg("-q")
        .arg(&path)
        .arg("-i")
        .arg(&check)
        .assert()
        .success();
    bloomery()
        .arg("check")
        .arg("-q")
        .arg(&path)
        .arg("-i")
        .arg("-")
        .write_stdin(lines("file-", 10))
        .assert()
        .success();
}

#[test]
fn info_reports_variant_parameters_and_estimates() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "f.bloom", "classic", 1000);
    add_lines(&path, "x", 300);
    let out = stdout_of(bloomery().arg("info").arg(&path));
    assert!(out.contains("variant: classic"), "{out}");
    assert!(
        out.contains("bits: 9600") && out.contains("hash functions: 7"),
        "{out}"
    );
    let estimate: f64 = out
        .lines()
        .find_map(|line| line.strip_prefix("estimated items: "))
        .expect("an estimate")
        .parse()
        .unwrap();
    assert!((estimate - 300.0).abs() < 30.0, "{out}");
    assert!(
        out.contains("fill ratio") && out.contains("current false-positive estimate"),
        "{out}"
    );
    let blocked = create(&dir, "b.bloom", "blocked", 1000);
    assert!(stdout_of(bloomery().arg("info").arg(&blocked)).contains("variant: blocked"));
}

#[test]
fn standard_input_left_unread_beside_item_arguments_is_warned_of() {
    // Items given as arguments (or -i FILE) leave standard input unread: lines redirected
    // beside them were dropped without a word.
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "f.bloom", "blocked", 1_000);
    let held = dir.path().join("held.txt");
    fs::write(&held, "piped\n").unwrap();
    let empty = dir.path().join("empty.txt");
    fs::write(&empty, "").unwrap();
    let run = |stdin: &Path, extra: &[&str]| {
        let output = StdCommand::new(assert_cmd::cargo::cargo_bin("bloomery"))
            .arg("add")
            .arg(&path)
            .arg("argument")
            .args(extra)
            .stdin(fs::File::open(stdin).unwrap())
            .output()
            .expect("runs");
        assert!(output.status.success(), "{output:?}");
        String::from_utf8(output.stderr).expect("UTF-8")
    };
    let warned = run(&held, &[]);
    assert!(
        warned.contains("warning: standard input holds data that is not read"),
        "{warned}"
    );
    let missing = bloomery()
        .arg("check")
        .arg(&path)
        .arg("piped")
        .output()
        .expect("runs");
    assert_eq!(missing.status.code(), Some(1), "not added, as warned");
    assert_eq!(run(&empty, &[]), "", "nothing held: no warning");
    assert_eq!(run(&held, &["-i", "-"]), "", "read: no warning");
    assert_eq!(
        run(&held, &["-i", "/dev/stdin"]),
        "",
        "read by its name: no warning"
    );
    // A shell loop reading a line at a time gives each run its input past the start: the
    // rest is the shell's, not warned of.
    let lines_file = dir.path().join("loop.txt");
    fs::write(&lines_file, "one\ntwo\nthree\n").unwrap();
    let shell = StdCommand::new("sh")
        .arg("-c")
        .arg(format!(
            "while read line; do {} add {} \"$line\"; done",
            assert_cmd::cargo::cargo_bin("bloomery").display(),
            path.display()
        ))
        .stdin(fs::File::open(&lines_file).unwrap())
        .output()
        .expect("runs");
    assert!(shell.status.success(), "{shell:?}");
    assert_eq!(String::from_utf8_lossy(&shell.stderr), "", "a shell loop's input");
    bloomery()
        .arg("check")
        .arg("-q")
        .arg(&path)
        .args(["one", "two", "three"])
        .assert()
        .success();
    bloomery()
        .arg("check")
        .arg("-q")
        .arg(&path)
        .args(["piped", "argument"])
        .assert()
        .success();
}

#[test]
fn dedup_prints_each_line_once_and_remembers_across_runs() {
    let dir = TempDir::new().unwrap();
    let input = "a\nb\na\nc\nb\nd\n";
    let out = stdout_of(bloomery().args(["dedup", "--items", "1000"]).write_stdin(input));
    assert_eq!(out, "a\nb\nc\nd\n");
    let memory = dir.path().join("seen.bloom");
    let first = stdout_of(
        bloomery()
            .arg("dedup")
            .arg("--filter")
            .arg(&memory)
            .write_stdin("a\nb\n"),
    );
    assert_eq!(first, "a\nb\n");
    let second = stdout_of(
        bloomery()
            .arg("dedup")
            .arg("--filter")
            .arg(&memory)
            .write_stdin("b\nc\na\n"),
    );
    assert_eq!(second, "c\n");
}

/// `dedup` and `check` held their output until 4,096 lines had come or the input ended:
/// `tail -f log | bloomery dedup` printed nothing for a quiet log. A line that comes, then
/// nothing, is now answered while the input waits.
#[test]
fn dedup_and_check_answer_each_line_while_the_input_waits() {
    let dir = TempDir::new().unwrap();
    let seen = create(&dir, "seen.bloom", "blocked", 1000);
    let runs: [(&[&str], &[&str]); 3] = [
        (&["dedup", "--items", "1000"], &["a", "b"]),
        (&["dedup", "--filter", seen.to_str().unwrap()], &["a", "b"]),
        (
            &["check", seen.to_str().unwrap()],
            &["probably present\ta", "absent\tc"],
        ),
    ];
    for (args, expected) in runs {
        let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("bloomery"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("runs");
        let mut stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let (sender, lines) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines() {
                let _ = sender.send(line.expect("reads"));
            }
        });
        // The input stays open: each line must come out before the next goes in. The
        // first write ends with the start of the second line, as a producer's block of
        // output ends mid-line (the line before was held until the next line ended).
        let writes = if args[0] == "check" {
            ["a\nc", "\n"]
        } else {
            ["a\nb", "\n"]
        };
        for (input, expected) in writes.iter().zip(expected) {
            write!(stdin, "{input}").expect("writes");
            stdin.flush().expect("flushes");
            let line = lines.recv_timeout(Duration::from_secs(10));
            assert_eq!(line.as_deref(), Ok(*expected), "{args:?}");
        }
        drop(stdin);
        assert!(
            child.wait().expect("waits").code().is_some_and(|code| code < 2),
            "{args:?}"
        );
        reader.join().unwrap();
    }
}

#[test]
fn dedup_over_a_rotating_filter_drops_lines_an_older_generation_holds() {
    // 1,500 lines rotate through generations; lines 1-5 come again while the filter still
    // holds them (in an older generation): they are duplicates, not new lines.
    let dir = TempDir::new().unwrap();
    let memory = dir.path().join("window.bloom");
    bloomery()
        .args([
            "create",
            "--items",
            "1000",
            "--fpp",
            "0.001",
            "--variant",
            "rotating",
        ])
        .arg(&memory)
        .assert()
        .success();
    let input: String = (1..=1500).chain(1..=5).map(|n| format!("{n}\n")).collect();
    let out = stdout_of(
        bloomery()
            .arg("dedup")
            .arg("--filter")
            .arg(&memory)
            .write_stdin(input),
    );
    for again in ["1", "2", "3", "4", "5"] {
        assert!(
            out.lines().filter(|line| *line == again).count() <= 1,
            "{again} printed twice"
        );
    }
    let held = stdout_of(
        bloomery()
            .arg("check")
            .arg(&memory)
            .args(["1", "2", "3", "4", "5"]),
    );
    assert_eq!(held.matches("probably present").count(), 5, "{held}");
}

#[test]
fn an_add_whose_first_items_a_rotating_filter_forgot_says_so() {
    // Two generations of one item: of "a b c", "a" is gone by "c" (its generation rotated
    // out). The add said nothing, and `check` answered "absent".
    let dir = TempDir::new().unwrap();
    let short = create(&dir, "short.bloom", "rotating", 1);
    let output = bloomery()
        .arg("add")
        .arg(&short)
        .args(["a", "b", "c"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("added 3 new items to a rotating filter that keeps 2 generations of 1")
            && stderr.contains("are forgotten already"),
        "{stderr}"
    );
    let answers = String::from_utf8(
        bloomery()
            .arg("check")
            .arg(&short)
            .arg("a")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert!(answers.starts_with("absent"), "{answers}");
    // All kept (the last of 2 generations of 1,000 not full): nothing said.
    let long = create(&dir, "long.bloom", "rotating", 1_000);
    let output = bloomery()
        .arg("add")
        .arg(&long)
        .write_stdin(lines("item", 1_000))
        .output()
        .unwrap();
    assert!(output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stderr), "");
    check_all(&long, lines("item", 1_000));
}

#[test]
fn dedup_keeps_the_lines_it_printed_when_the_filter_fills_mid_run() {
    // A filter of 4,500 that does not grow, given 5,000 lines (more than one batch): it
    // refuses a line part way; the lines printed before it are saved in the filter, so a
    // second run prints none of them again.
    let dir = TempDir::new().unwrap();
    let memory = dir.path().join("full.bloom");
    bloomery()
        .args([
            "create",
            "--items",
            "4500",
            "--fpp",
            "0.0001",
            "--variant",
            "scalable",
            "--nonscaling",
        ])
        .arg(&memory)
        .assert()
        .success();
    let input: String = (1..=5000).map(|n| format!("{n}\n")).collect();
    let output = bloomery()
        .arg("dedup")
        .arg("--filter")
        .arg(&memory)
        .write_stdin(input.clone())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("full") && stderr.contains("saved"), "{stderr}");
    let printed = String::from_utf8(output.stdout).unwrap();
    assert!(
        printed.lines().count() > 4096,
        "{} lines",
        printed.lines().count()
    );
    let again = bloomery()
        .arg("dedup")
        .arg("--filter")
        .arg(&memory)
        .write_stdin(printed)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(String::from_utf8(again.stdout).unwrap(), "");
}

#[test]
fn a_large_file_of_something_else_is_refused_by_its_header_not_loaded() {
    // 1 TiB of zeros (sparse): more than any memory here, so a load that read it first
    // (or held it to the memory available first) would say so; the header is read first.
    let dir = TempDir::new().unwrap();
    let zeros = dir.path().join("zeros.bin");
    fs::File::create(&zeros).unwrap().set_len(1 << 40).unwrap();
    let verify = error_of(bloomery().arg("verify").arg(&zeros));
    assert!(verify.contains("wrong magic bytes"), "{verify}");
    let export = error_of(bloomery().arg("export").arg(&zeros).arg(dir.path().join("out")));
    assert!(export.contains("wrong magic bytes"), "{export}");
}

/// A file name of 226 to 255 bytes is valid, but the temporary file beside it
/// (`.NAME.PID.UNIQUE.tmp`, 30 bytes more) was not: `create` failed with "File name too
/// long", as did every command that writes a whole file (an add to a scalable filter, a
/// merge's output). The temporary name is now shortened for a long name.
#[test]
fn a_long_file_name_can_be_created_added_to_and_merged_into() {
    let dir = TempDir::new().unwrap();
    let long = |last: char| format!("{}{last}.bloom", "f".repeat(248));
    let scalable = create(&dir, &long('s'), "scalable", 100);
    let blocked = create(&dir, &long('b'), "blocked", 100);
    for path in [&scalable, &blocked] {
        assert_eq!(path.file_name().unwrap().len(), 255);
        bloomery().arg("add").arg(path).arg("x").assert().success();
        bloomery().arg("check").arg(path).arg("x").assert().success();
    }
    let merged = dir.path().join(long('m'));
    bloomery()
        .arg("merge")
        .arg(&merged)
        .arg(&blocked)
        .arg(&blocked)
        .assert()
        .success();
    bloomery().arg("check").arg(&merged).arg("x").assert().success();
    // No temporary file is left.
    assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 3);
}

#[test]
fn merge_and_intersect_combine_compatible_files() {
    let dir = TempDir::new().unwrap();
    let a = create(&dir, "a.bloom", "blocked", 1000);
    let b = create(&dir, "b.bloom", "blocked", 1000);
    bloomery()
        .arg("add")
        .arg(&a)
        .args(["left", "both"])
        .assert()
        .success();
    bloomery()
        .arg("add")
        .arg(&b)
        .args(["right", "both"])
        .assert()
        .success();
    let union = dir.path().join("union.bloom");
    bloomery()
        .arg("merge")
        .arg(&union)
        .arg(&a)
        .arg(&b)
        .assert()
        .success();
    bloomery()
        .arg("check")
        .arg(&union)
        .args(["left", "right", "both"])
        .assert()
        .success();
    let common = dir.path().join("common.bloom");
    bloomery()
        .arg("intersect")
        .arg(&common)
        .arg(&a)
        .arg(&b)
        .assert()
        .success();
    bloomery()
        .arg("check")
        .arg(&common)
        .arg("both")
        .assert()
        .success();
    bloomery().arg("check").arg(&common).arg("left").assert().code(1);

    let other = create(&dir, "other.bloom", "blocked", 100_000);
    let message = error_of(
        bloomery()
            .arg("merge")
            .arg(dir.path().join("x.bloom"))
            .arg(&a)
            .arg(&other),
    );
    assert!(
        message.contains("other.bloom") && message.contains("incompatible"),
        "{message}"
    );
    let classic = create(&dir, "c.bloom", "classic", 1000);
    let message = error_of(
        bloomery()
            .arg("merge")
            .arg(dir.path().join("y.bloom"))
            .arg(&a)
            .arg(&classic),
    );
    assert!(message.contains("classic"), "{message}");

    // Same size, another seed: the items of the second would read as absent in a merge
    // that kept the first seed, so the merge is refused.
    let reseeded = dir.path().join("reseeded.bloom");
    bloomery()
        .args(["create", "--variant", "blocked", "--items", "1000", "--seed", "9"])
        .arg(&reseeded)
        .assert()
        .success();
    let merged = dir.path().join("z.bloom");
    let message = error_of(bloomery().arg("merge").arg(&merged).arg(&a).arg(&reseeded));
    assert!(message.contains("seeds differ: 0 vs 9"), "{message}");
    assert!(!merged.exists());
}

#[test]
fn export_writes_guava_bytes_that_the_library_reads_back() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "c.bloom", "classic", 1000);
    add_lines(&path, "item", 200);
    let exported = dir.path().join("c.guava");
    bloomery()
        .arg("export")
        .arg(&path)
        .arg(&exported)
        .assert()
        .success();
    let guava = bloomery::BloomFilter::from_guava_bytes(&fs::read(&exported).unwrap()).unwrap();
    let bytes = fs::read(&path).unwrap();
    let (header, payload) = bloomery::format::native::decode(&bytes).unwrap();
    let native: bloomery::BloomFilter =
        bloomery::format::native::Persist::from_parts(&header.params, payload).unwrap();
    assert_eq!(guava, native, "exported bits differ from the file's");
    for i in 0..200 {
        assert!(guava.contains(format!("item{i}").as_bytes()));
    }
    let blocked = create(&dir, "b.bloom", "blocked", 1000);
    let message = error_of(
        bloomery()
            .arg("export")
            .arg(&blocked)
            .arg(dir.path().join("b.guava")),
    );
    assert!(message.contains("only classic filters"), "{message}");
    // Over the filter itself (through another name of it too): refused, the file kept.
    let link = dir.path().join("link.bloom");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    for output in [&path, &link] {
        let message = error_of(bloomery().args(["export", "--force"]).arg(&path).arg(output));
        assert!(message.contains("is the filter being exported"), "{message}");
    }
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

/// `create --variant split-block --hash xxh3 --seed S`: the split-block layout with the
/// blocked filter's XXH3 item hash. Every item is found (single adds, added in place, a
/// merge), `info` names the hash, and what would lose items is refused by name: export to
/// Parquet (whose readers hash with XXH64), a merge with another hasher or seed, and
/// `--hash xxh3` for a variant that does not take it.
#[test]
fn a_split_block_filter_hashed_with_xxh3_finds_every_item_and_stays_out_of_parquet() {
    let dir = TempDir::new().unwrap();
    let create_xxh3 = |name: &str, seed: &str| {
        let path = dir.path().join(name);
        bloomery()
            .args([
                "create",
                "--variant",
                "split-block",
                "--hash",
                "xxh3",
                "--seed",
                seed,
            ])
            .args(["--items", "1000", "--fpp", "0.01"])
            .arg(&path)
            .assert()
            .success();
        path
    };
    let path = create_xxh3("x.bloom", "5");
    add_lines(&path, "item", 800);
    check_all(&path, lines("item", 800));
    let loaded: bloomery::SplitBlockBloomFilter =
        bloomery::format::native::Persist::from_bytes(&fs::read(&path).unwrap()).unwrap();
    assert_eq!(
        loaded.hasher(),
        bloomery::split_block::SplitBlockHasher::Xxh3 { seed: 5 }
    );
    assert!((0..800).all(|i| loaded.contains(&format!("item{i}"))));
    let info = stdout_of(bloomery().arg("info").arg(&path));
    assert!(info.contains("XXH3-64, seed 5"), "{info}");

    let message = error_of(
        bloomery()
            .args(["export", "--format", "parquet-sbbf"])
            .arg(&path)
            .arg(dir.path().join("x.sbbf")),
    );
    assert!(message.contains("Parquet's (XXH64, seed 0)"), "{message}");
    assert!(!dir.path().join("x.sbbf").exists());

    // Same seed: merged, every item of both found. Another seed or Parquet's hash: refused.
    let same = create_xxh3("same.bloom", "5");
    add_lines(&same, "other", 100);
    let union = dir.path().join("union.bloom");
    bloomery()
        .arg("merge")
        .arg(&union)
        .arg(&path)
        .arg(&same)
        .assert()
        .success();
    check_all(&union, lines("item", 800) + &lines("other", 100));
    let parquet = create(&dir, "parquet.bloom", "split-block", 1000);
    for other in [create_xxh3("seed6.bloom", "6"), parquet] {
        let message = error_of(
            bloomery()
                .arg("merge")
                .arg(dir.path().join("refused.bloom"))
                .arg(&path)
                .arg(&other),
        );
        assert!(message.contains("hashers differ"), "{message}");
    }

    let message = error_of(
        bloomery()
            .args(["create", "--variant", "classic", "--hash", "xxh3"])
            .arg(dir.path().join("classic.bloom")),
    );
    assert!(
        message.contains("--hash does not apply to classic filters (split-block filters take it)"),
        "{message}"
    );
    // Every option a variant would ignore is refused by name, as are the options of runs
    // on Redis given for a file.
    for (args, expected) in [
        (
            &["--variant", "classic", "--seed", "7"][..],
            "--seed does not apply to classic",
        ),
        (
            &["--variant", "split-block", "--seed", "7"],
            "--seed does not apply to split-block",
        ),
        (&["--generations", "5"], "--generations does not apply to blocked"),
        (&["--nonscaling"], "--nonscaling does not apply to blocked"),
        (&["--hash", "parquet"], "--hash does not apply to blocked"),
        (
            &["--wait", "1"],
            "--wait applies only with --redis or --redis-cluster",
        ),
        (&["--batch-items", "5"], "--batch-items applies only with --redis"),
    ] {
        let path = dir.path().join("ignored.bloom");
        let message = error_of(bloomery().arg("create").args(args).arg(&path));
        assert!(message.contains(expected), "{args:?}: {message}");
        assert!(!path.exists());
    }
}

#[test]
fn options_a_sharded_filters_command_would_ignore_are_refused() {
    // Refused before connecting: no server listens on port 1.
    let url = "redis://127.0.0.1:1";
    for (command, args, expected) in [
        (
            "check",
            &["--min-shards", "3"][..],
            "--min-shards does not apply to check",
        ),
        (
            "add",
            &["--shard-bytes", "4096"],
            "--shard-bytes does not apply to add",
        ),
        ("info", &["--wait", "1"], "--wait does not apply to info"),
        ("check", &["--wait", "1"], "--wait does not apply to check"),
        (
            "info",
            &["--batch-items", "5"],
            "--batch-items does not apply to info",
        ),
        ("add", &["--wait-ms", "5"], "--wait-ms applies only with --wait"),
        (
            "create",
            &["--items", "5", "--no-space-check"],
            "--no-space-check does not apply to a sharded filter",
        ),
        // Accepted without a word before.
        (
            "check",
            &["--no-verify"],
            "--no-verify does not apply to a sharded filter",
        ),
        // The library's refusal named its parameter, expected_items.
        (
            "create",
            &["--items", "0"],
            "--items must be at least 1 for a sharded filter, got 0",
        ),
    ] {
        let items: &[&str] = if matches!(command, "add" | "check") {
            &["x"]
        } else {
            &[]
        };
        let message = error_of(
            bloomery()
                .args([command, "--redis", url, "f"])
                .args(items)
                .args(args),
        );
        assert!(message.contains(expected), "{command} {args:?}: {message}");
    }
    // --redis itself, on a command that has no sharded road, says which ones have it (it
    // said "--redis does not apply to merge ()").
    for command in [
        &["merge", "out", "a"][..],
        &["export", "a", "-"],
        &["verify", "a"],
    ] {
        let message = error_of(bloomery().args(command).args(["--redis", url]));
        assert!(
            message.contains(&format!(
                "--redis does not apply to {} (a sharded filter on Redis has create, add, check, dedup and info)",
                command[0]
            )),
            "{message}"
        );
    }
}

#[test]
fn a_window_in_the_environment_that_is_no_number_of_bytes_is_refused() {
    // BLOOMERY_WINDOW_BYTES=abc (or 0, 1e3) went unnoticed: the default window was used.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f.bloom");
    stdout_of(bloomery().args(["create", "--items", "100"]).arg(&path));
    for bad in ["abc", "0", "1e3", "-5", "4095", "18446744073709551616"] {
        let message = error_of(
            bloomery()
                .env("BLOOMERY_WINDOW_BYTES", bad)
                .args(["check"])
                .arg(&path)
                .arg("x"),
        );
        assert!(
            message.contains(&format!(
                "BLOOMERY_WINDOW_BYTES must be a number of bytes, at least 4096 (one page), got '{bad}'"
            )),
            "{message}"
        );
    }
    stdout_of(
        bloomery()
            .env("BLOOMERY_WINDOW_BYTES", "4096")
            .args(["add"])
            .arg(&path)
            .arg("x"),
    );
}

#[test]
fn a_blocked_filter_at_a_rate_where_it_costs_more_than_twice_a_classic_one_is_warned_of() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warned = |items: &str, fpp: &str| {
        let path = dir.path().join(format!("{items}-{fpp}.bloom"));
        let output = bloomery()
            .args(["create", "--items", items, "--fpp", fpp])
            .arg(&path)
            .output()
            .expect("runs");
        assert!(output.status.success() && path.exists(), "{output:?}");
        String::from_utf8(output.stderr).expect("UTF-8")
    };
    // Many items at a low rate: Guava's sizing meets it within a tenth, and is named.
    let stderr = warned("2000000", "1e-7");
    assert!(
        stderr.starts_with("bloomery: warning: a blocked filter for 2000000 items at fpp 1e-7 takes ")
            && stderr.contains(" times the ")
            && stderr.contains("that a filter hashing as Guava does needs for that rate")
            && stderr.contains("; --variant classic takes ")
            && stderr.lines().count() == 1,
        "{stderr}"
    );
    // --no-space-check skips the space checks, not the warning (it went with them).
    let output = bloomery()
        .args([
            "create",
            "--no-space-check",
            "--items",
            "2000000",
            "--fpp",
            "1e-7",
        ])
        .arg(dir.path().join("unchecked.bloom"))
        .output()
        .expect("runs");
    assert!(
        output.status.success() && String::from_utf8_lossy(&output.stderr) == stderr,
        "{output:?}"
    );
    // Not where Guava's sizing falls well short of the rate (its double hashing's floor).
    let stderr = warned("2000000", "1e-8");
    assert!(
        stderr.contains("warning: a blocked filter") && !stderr.contains("--variant classic"),
        "{stderr}"
    );
    // None at the usual rates, nor for few items at a low rate (the blocked filter is the
    // smaller there), nor for 0 items, sized as 1 (it compared a blocked filter of one item
    // with a classic one of none).
    for (items, fpp) in [
        ("2000000", "0.01"),
        ("2000000", "1e-6"),
        ("1000", "1e-9"),
        ("0", "1e-15"),
    ] {
        assert_eq!(warned(items, fpp), "", "{items} at {fpp}");
    }
}

#[test]
fn a_kernel_or_timings_in_the_environment_that_would_be_misread_are_refused() {
    // BLOOMERY_KERNEL naming no kernel of this CPU ran the fastest one without a word;
    // BLOOMERY_TIMINGS=0 (any value) turned the timings on.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("f.bloom");
    stdout_of(bloomery().args(["create", "--items", "100"]).arg(&path));
    for bad in ["bogus", "AVX2", "", "sve"] {
        let message = error_of(
            bloomery()
                .env("BLOOMERY_KERNEL", bad)
                .arg("add")
                .arg(&path)
                .arg("x"),
        );
        assert!(
            message.contains("BLOOMERY_KERNEL must be a kernel this CPU has (scalar")
                && message.trim_end().ends_with(&format!("got '{bad}'")),
            "{message}"
        );
    }
    let kernels = bloomery::blocked::Kernel::available();
    for kernel in &kernels {
        stdout_of(
            bloomery()
                .env("BLOOMERY_KERNEL", kernel.name())
                .arg("add")
                .arg(&path)
                .arg("x"),
        );
    }
    for bad in ["yes", "true", "", "2"] {
        let message = error_of(
            bloomery()
                .env("BLOOMERY_TIMINGS", bad)
                .arg("add")
                .arg(&path)
                .arg("x"),
        );
        assert!(
            message.contains(&format!(
                "BLOOMERY_TIMINGS must be 1 (print an update's phases) or 0, got '{bad}'"
            )),
            "{message}"
        );
    }
    let quiet = bloomery()
        .env("BLOOMERY_TIMINGS", "0")
        .arg("add")
        .arg(&path)
        .arg("y")
        .output()
        .expect("runs");
    assert!(quiet.status.success() && quiet.stderr.is_empty(), "{quiet:?}");
}

#[test]
fn sharded_filter_options_out_of_range_are_refused_before_connecting() {
    // No server listens on port 1: each is refused by the CLI before any connection.
    // --batch-items 2^64 - 1 panicked ("capacity overflow"), 10^12 aborted on allocating
    // the batch, 0 was taken as 1 without a word; --wait-ms 2^64 - 1 was refused by Redis
    // after the batch was written.
    let url = "redis://127.0.0.1:1";
    for (command, args, expected) in [
        (
            "add",
            &["--batch-items", "18446744073709551615"][..],
            "--batch-items",
        ),
        ("check", &["--batch-items", "1000000000000"], "--batch-items"),
        ("add", &["--batch-items", "0"], "1..=16777216"),
        (
            "add",
            &["--wait", "1", "--wait-ms", "18446744073709551615"],
            "--wait-ms",
        ),
        ("add", &["--wait", "18446744073709551615"], "--wait"),
        ("add", &["--wait", "-1"], "--wait"),
        // The library's words were "min_shards must be in 1..=1048576" and
        // "max_shard_bytes must be at least 64": the flags are named now.
        ("create", &["--items", "5", "--min-shards", "0"], "--min-shards"),
        (
            "create",
            &["--items", "5", "--min-shards", "1048577"],
            "1..=1048576",
        ),
        ("create", &["--items", "5", "--shard-bytes", "1"], "--shard-bytes"),
    ] {
        let item: &[&str] = if command == "create" { &[] } else { &["x"] };
        let output = bloomery()
            .args([command, "--redis", url, "f"])
            .args(item)
            .args(args)
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command} {args:?}: {stderr}");
        assert!(
            stderr.contains("invalid value") && stderr.contains(expected),
            "{command} {args:?}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // A retry time past what the clock holds is no deadline, not a panic ("overflow when
    // adding duration to instant"): a port that does not parse fails at once, as the
    // target's fault.
    let message = error_of(bloomery().args([
        "check",
        "--redis",
        "redis://127.0.0.1:99999",
        "--retry-seconds",
        "18446744073709551615",
        "f",
        "x",
    ]));
    assert!(
        message.contains("bad Redis target 'redis://127.0.0.1:99999'"),
        "{message}"
    );
}

/// `export --format parquet-sbbf` writes what a Parquet file holds for a column chunk's
/// bloom filter (header and bitset), `parquet-sbbf-bitset` the bitset alone; `import`
/// reads both back into split-block files that find every item.
#[test]
fn a_split_block_filter_for_parquet_past_its_readers_128_mib_is_said_at_create_and_export() {
    // 1.1e8 items at 1%: 146 MB exactly, over what Parquet's readers take. The help said
    // "up to 128 MiB" and create said nothing; export then sent the user to create.
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("big.bloom");
    let output = bloomery()
        .args([
            "create",
            "--variant",
            "split-block",
            "--items",
            "110000000",
            "--fpp",
            "0.01",
        ])
        .arg(&path)
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("over the 128 MiB Parquet's readers take"),
        "{stderr}"
    );
    let message = error_of(
        bloomery()
            .args(["export", "--format", "parquet-sbbf"])
            .arg(&path)
            .arg(dir.path().join("big.sbbf")),
    );
    assert!(message.contains("at most 128 MiB"), "{message}");
    // Within it, or not for Parquet: nothing said.
    for args in [
        ["--items", "1000000", "--hash", "parquet"],
        ["--items", "110000000", "--hash", "xxh3"],
    ] {
        let output = bloomery()
            .args(["create", "--variant", "split-block", "--force"])
            .args(args)
            .arg(&path)
            .output()
            .unwrap();
        assert!(output.status.success());
        assert_eq!(String::from_utf8_lossy(&output.stderr), "", "{args:?}");
    }
}

#[test]
fn parquet_sbbf_export_and_import_round_trip() {
    use bloomery::SplitBlockBloomFilter;

    let dir = TempDir::new().unwrap();
    let path = create(&dir, "s.bloom", "split-block", 1000);
    add_lines(&path, "item", 500);
    bloomery()
        .args(["add", "--format", "long"])
        .arg(&path)
        .args(["42", "-7"])
        .assert()
        .success();
    let native: SplitBlockBloomFilter =
        bloomery::format::native::Persist::from_bytes(&fs::read(&path).unwrap()).unwrap();

    let with_header = dir.path().join("s.sbbf");
    let bitset = dir.path().join("s.bitset");
    for (format, out) in [("parquet-sbbf", &with_header), ("parquet-sbbf-bitset", &bitset)] {
        bloomery()
            .args(["export", "--format", format])
            .arg(&path)
            .arg(out)
            .assert()
            .success();
    }
    let header_bytes = fs::read(&with_header).unwrap();
    assert_eq!(header_bytes, native.to_parquet_bytes().unwrap());
    let (header_len, num_bytes) = bloomery::format::parquet::read_header(&header_bytes).unwrap();
    assert_eq!((header_len, num_bytes), (16, native.num_blocks() * 32));
    assert_eq!(
        fs::read(&bitset).unwrap(),
        &native.to_parquet_bitset().unwrap()[..]
    );
    assert!(header_bytes.ends_with(&fs::read(&bitset).unwrap()));
    // To standard output too.
    let output = bloomery()
        .args(["export", "--format", "parquet-sbbf"])
        .arg(&path)
        .arg("-")
        .output()
        .unwrap();
    assert_eq!(output.stdout, header_bytes);

    for (format, input) in [("parquet-sbbf", &with_header), ("parquet-sbbf-bitset", &bitset)] {
        let imported = dir.path().join(format!("imported-{format}.bloom"));
        bloomery()
            .args(["import", "--format", format])
            .arg(input)
            .arg(&imported)
            .assert()
            .success();
        assert_eq!(fs::read(&imported).unwrap(), fs::read(&path).unwrap(), "{format}");
        bloomery()
            .args(["check", "-q", "-i", "-"])
            .arg(&imported)
            .write_stdin(lines("item", 500))
            .assert()
            .success();
        bloomery()
            .args(["check", "-q", "--format", "long"])
            .arg(&imported)
            .args(["42", "-7"])
            .assert()
            .success();
        let info = stdout_of(bloomery().arg("info").arg(&imported));
        assert!(info.contains("split-block") && info.contains("XXH64"), "{info}");
    }

    // The wrong variant, the wrong form, and bytes that are neither.
    let blocked = create(&dir, "b.bloom", "blocked", 1000);
    let message = error_of(
        bloomery()
            .args(["export", "--format", "parquet-sbbf"])
            .arg(&blocked)
            .arg(dir.path().join("b.sbbf")),
    );
    assert!(message.contains("only split-block filters"), "{message}");
    let message = error_of(
        bloomery()
            .args(["import", "--format", "parquet-sbbf"])
            .arg(&bitset)
            .arg(dir.path().join("x.bloom")),
    );
    assert!(message.contains("Parquet bloom filter"), "{message}");
    let message = error_of(
        bloomery()
            .args(["import", "--format", "parquet-sbbf-bitset"])
            .arg(&with_header)
            .arg(dir.path().join("y.bloom")),
    );
    assert!(message.contains("32-byte blocks"), "{message}");
    let message = error_of(
        bloomery()
            .args(["import", "--format", "parquet-sbbf"])
            .arg(&with_header)
            .arg(&path),
    );
    assert!(message.contains("already exists"), "{message}");
    // Merging two split-block files is a union of their bitsets.
    let other = create(&dir, "o.bloom", "split-block", 1000);
    bloomery().arg("add").arg(&other).arg("pear").assert().success();
    let merged = dir.path().join("m.bloom");
    bloomery()
        .arg("merge")
        .arg(&merged)
        .arg(&path)
        .arg(&other)
        .assert()
        .success();
    bloomery()
        .args(["check", "-q"])
        .arg(&merged)
        .args(["pear", "item0", "item499"])
        .assert()
        .success();
}

/// A filter RedisBloom 2.6.28 made (its `BF.SCANDUMP` pieces, each framed as iterator and
/// length, 8 bytes little-endian each, then the data), moved to a file and back:
/// `import --format redisbloom-scandump` reads the pieces joined, as RedisBloom's migration
/// loop gives them, and the file answers for every item RedisBloom was given;
/// `export` gives the same bytes back.
#[test]
fn a_redisbloom_filter_s_scandump_pieces_import_and_export() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bloomery/tests/data/redisbloom");
    let dir = TempDir::new().unwrap();
    for name in ["scaled", "expansion4", "nonscaling"] {
        let framed = fs::read(fixtures.join(format!("{name}.more.scandump"))).unwrap();
        let (mut rest, mut joined) = (&framed[..], Vec::new());
        while !rest.is_empty() {
            let len = u64::from_le_bytes(rest[8..16].try_into().unwrap()) as usize;
            joined.extend_from_slice(&rest[16..16 + len]);
            rest = &rest[16 + len..];
        }
        let stream = dir.path().join(format!("{name}.scandump"));
        fs::write(&stream, &joined).unwrap();
        let file = dir.path().join(format!("{name}.bloom"));
        bloomery()
            .args(["import", "--format", "redisbloom-scandump"])
            .arg(&stream)
            .arg(&file)
            .assert()
            .success();
        let items = fs::read(fixtures.join(format!("{name}.items"))).unwrap();
        bloomery()
            .args(["check", "-q", "-i", "-"])
            .arg(&file)
            .write_stdin(items)
            .assert()
            .success();
        assert!(stdout_of(bloomery().arg("info").arg(&file)).contains("redisbloom"));
        let output = bloomery()
            .args(["export", "--format", "redisbloom-scandump"])
            .arg(&file)
            .arg("-")
            .output()
            .unwrap();
        assert_eq!(output.stdout, joined, "{name}");
        // A stream cut short is refused, naming the file.
        fs::write(&stream, &joined[..joined.len() - 1]).unwrap();
        let message = error_of(
            bloomery()
                .args(["import", "--force", "--format", "redisbloom-scandump"])
                .arg(&stream)
                .arg(&file),
        );
        assert!(
            message.contains(&*stream.to_string_lossy()) && message.contains("announces"),
            "{message}"
        );
    }
    let blocked = create(&dir, "b.bloom", "blocked", 100);
    let message = error_of(
        bloomery()
            .args(["export", "--format", "redisbloom-scandump"])
            .arg(&blocked)
            .arg(dir.path().join("b.out")),
    );
    assert!(message.contains("only redisbloom filters"), "{message}");
}

fn guava_data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bloomery/tests/data/guava/filters")
        .join(name)
}

fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn an_imported_guava_filter_answers_the_probes_as_guava_does() {
    let dir = TempDir::new().unwrap();
    // Text items through `bloomery check` (the ascii funnel hashes the line's bytes).
    let name = "ascii_n1000_p0.01";
    let imported = dir.path().join("ascii.bloom");
    bloomery()
        .arg("import")
        .arg(guava_data(&format!("{name}.bin")))
        .arg(&imported)
        .assert()
        .success();
    bloomery().arg("verify").arg(&imported).assert().success();
    let probes = fs::read_to_string(guava_data(&format!("{name}.probes.tsv"))).unwrap();
    let mut input = String::new();
    let mut expected = String::new();
    for line in probes.lines().skip(1) {
        let (answer, item) = line.split_once('\t').unwrap();
        input.push_str(item);
        input.push('\n');
        expected.push_str(if answer == "1" {
            "probably present\t"
        } else {
            "absent\t"
        });
        expected.push_str(item);
        expected.push('\n');
    }
    let output = bloomery()
        .arg("check")
        .arg(&imported)
        .write_stdin(input)
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(output.stdout).unwrap(), expected);

    // Binary items (hex in the vectors) cannot be command-line lines; read the imported file
    // back with the library and probe it with the raw bytes.
    let name = "bytes_n1000_p0.01";
    let imported = dir.path().join("bytes.bloom");
    bloomery()
        .arg("import")
        .arg("-")
        .arg(&imported)
        .write_stdin(fs::read(guava_data(&format!("{name}.bin"))).unwrap())
        .assert()
        .success();
    let bytes = fs::read(&imported).unwrap();
    let filter = <bloomery::BloomFilter as bloomery::format::native::Persist>::from_bytes(&bytes).unwrap();
    let probes = fs::read_to_string(guava_data(&format!("{name}.probes.tsv"))).unwrap();
    for line in probes.lines().skip(1) {
        let (answer, item) = line.split_once('\t').unwrap();
        assert_eq!(filter.contains(&from_hex(item)[..]), answer == "1", "{item}");
    }
}

/// Guava's own `BloomFilter<Long>` and `BloomFilter<Integer>` (longFunnel, integerFunnel),
/// from the shell: `create` + `add --format long` builds exactly Guava's bytes, and
/// `check --format long` on Guava's imported filter answers every probe as Guava did.
#[test]
fn guava_long_and_integer_filters_are_built_and_checked_from_the_shell() {
    let dir = TempDir::new().unwrap();
    for (name, format, items, fpp) in [
        ("long_n1000_p0.01", "long", 1000, "0.01"),
        ("long_n5000_p0.001", "long", 5000, "0.001"),
        ("int_n1000_p0.01", "int", 1000, "0.01"),
    ] {
        let built = dir.path().join(format!("{name}.bloom"));
        bloomery()
            .args([
                "create",
                "--variant",
                "classic",
                "--items",
                &items.to_string(),
                "--fpp",
                fpp,
            ])
            .arg(&built)
            .assert()
            .success();
        bloomery()
            .args(["add", "--format", format])
            .arg(&built)
            .arg("-i")
            .arg(guava_data(&format!("{name}.inserted.txt")))
            .assert()
            .success();
        let exported = dir.path().join(format!("{name}.guava"));
        bloomery()
            .arg("export")
            .arg(&built)
            .arg(&exported)
            .assert()
            .success();
        assert_eq!(
            fs::read(&exported).unwrap(),
            fs::read(guava_data(&format!("{name}.bin"))).unwrap(),
            "{name}: Guava's bytes"
        );

        let imported = dir.path().join(format!("{name}.imported.bloom"));
        bloomery()
            .arg("import")
            .arg(guava_data(&format!("{name}.bin")))
            .arg(&imported)
            .assert()
            .success();
        let probes = fs::read_to_string(guava_data(&format!("{name}.probes.tsv"))).unwrap();
        let (mut input, mut expected) = (String::new(), String::new());
        for line in probes.lines().skip(1) {
            let (answer, item) = line.split_once('\t').unwrap();
            input.push_str(&format!("{item}\n"));
            let label = if answer == "1" {
                "probably present"
            } else {
                "absent"
            };
            expected.push_str(&format!("{label}\t{item}\n"));
        }
        let output = bloomery()
            .args(["check", "--format", format])
            .arg(&imported)
            .write_stdin(input)
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(output.stdout).unwrap(), expected, "{name}");
    }
}

/// `create -n 10 foo/` (and `foo/.`) made a regular file `foo`, with status 0: a path
/// ending in `/`, `/.` or `/..` names a directory, and is refused as not a file name.
#[test]
fn a_path_ending_in_a_slash_is_not_a_file_name() {
    let dir = TempDir::new().unwrap();
    let good = create(&dir, "good.bloom", "blocked", 1000);
    let root = dir.path().display().to_string();
    for end in ["/", "/.", "/.."] {
        let path = format!("{root}/foo{end}");
        let message = error_of(bloomery().args(["create", "--items", "10", &path]));
        assert!(message.contains(&format!("{path}: not a file name")), "{message}");
        let message = error_of(bloomery().arg("merge").arg(&path).arg(&good).arg(&good));
        assert!(message.contains("not a file name"), "{message}");
    }
    assert!(!dir.path().join("foo").exists());
}

#[test]
fn bad_input_gets_one_line_naming_the_file_and_the_problem() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("missing.bloom");
    let message = error_of(bloomery().arg("check").arg(&missing).arg("x"));
    assert!(
        message.contains("missing.bloom") && message.contains("No such file"),
        "{message}"
    );

    let foreign = dir.path().join("foreign.bloom");
    fs::write(
        &foreign,
        b"this is not a filter at all, just some text that is long enough",
    )
    .unwrap();
    let message = error_of(bloomery().arg("info").arg(&foreign));
    assert!(
        message.contains("foreign.bloom") && message.contains("magic"),
        "{message}"
    );

    // Shorter than a header: still told by its magic, not called a filter cut short.
    fs::write(&foreign, b"hello world\n").unwrap();
    let message = error_of(bloomery().arg("info").arg(&foreign));
    assert!(message.contains("magic"), "{message}");

    let good = create(&dir, "good.bloom", "blocked", 1000);
    let bytes = fs::read(&good).unwrap();

    // A missing input file: an error before any item changed the filter (the arguments'
    // items included); a file written whole says that nothing was saved.
    let message = error_of(bloomery().arg("add").arg(&good).args(["a", "-i"]).arg(&missing));
    assert!(message.contains("No such file"), "{message}");
    assert_eq!(fs::read(&good).unwrap(), bytes);
    let scalable = create(&dir, "scalable.bloom", "scalable", 1000);
    let message = error_of(
        bloomery()
            .arg("add")
            .args(["-f", "long"])
            .arg(&scalable)
            .args(["1", "x"]),
    );
    assert!(message.ends_with("nothing was saved"), "{message}");

    let mut future = bytes.clone();
    future[8] = 9;
    let path = dir.path().join("future.bloom");
    fs::write(&path, &future).unwrap();
    let message = error_of(bloomery().arg("check").arg(&path).arg("x"));
    assert!(message.contains("version 9"), "{message}");

    let path = dir.path().join("truncated.bloom");
    fs::write(&path, &bytes[..bytes.len() - 10]).unwrap();
    let message = error_of(bloomery().arg("check").arg(&path).arg("x"));
    assert!(message.contains("truncated"), "{message}");
    let message = error_of(bloomery().arg("add").arg(&path).arg("x"));
    assert!(message.contains("truncated"), "{message}");

    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x20;
    let path = dir.path().join("flipped.bloom");
    fs::write(&path, &flipped).unwrap();
    let message = error_of(bloomery().arg("verify").arg(&path));
    assert!(
        message.contains("flipped.bloom") && message.contains("payload checksum"),
        "{message}"
    );
    let message = error_of(bloomery().arg("add").arg(&path).arg("x"));
    assert!(message.contains("payload checksum"), "{message}");

    // A negative number is a value told its range, not "unexpected argument '-0'"; text
    // that rounds to 0 or 1 is refused as written, not as "got 0" or "got 1"; text that
    // is no number in the same words, not Rust's "invalid float literal".
    for (fpp, why) in [
        ("1.5", ""),
        ("NaN", ""),
        ("-0.5", ""),
        ("-2", ""),
        ("0", ""),
        ("1e400", ""),
        ("0x10", ""),
        ("", ""),
        ("1e-400", ": it rounds to 0 as a double"),
        ("0.99999999999999999", ": it rounds to 1 as a double"),
        // Out of (0, 1) whatever the rounding: no rounding said.
        ("1.00000000000000002", ""),
    ] {
        let output = bloomery()
            .args(["create", "--fpp", fpp])
            .arg(dir.path().join("p.bloom"))
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{fpp}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "invalid value '{fpp}' for '--fpp <FPP>': '{fpp}' is not a probability in (0, 1){why}\n"
            )),
            "{stderr}"
        );
    }
    // And for an unsigned number, its range, not "invalid digit found in string".
    for args in [
        &["--items", "-5", "0..="][..],
        &["--max-bytes", "-1", "0..="],
        &["--seed", "-7", "0..="],
        &["--generations", "-1", "2..=1024"],
        &["--items", "1e6", "0..="],
        &[
            "--redis",
            "redis://127.0.0.1:1",
            "--batch-items",
            "-1",
            "1..=16777216",
        ],
        &["--redis", "redis://127.0.0.1:1", "--shard-bytes", "63", "64..="],
    ] {
        let (args, range) = args.split_at(args.len() - 1);
        let output = bloomery()
            .arg("create")
            .args(args)
            .arg(dir.path().join("p.bloom"))
            .output()
            .expect("runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        let value = args[args.len() - 1];
        assert!(
            stderr.contains(&format!("invalid value '{value}'"))
                && stderr.contains(&format!("'{value}' is not a whole number in {}", range[0])),
            "{args:?}: {stderr}"
        );
    }
    let message = error_of(bloomery().arg("create").arg(&good));
    assert!(message.contains("already exists"), "{message}");

    // Standard input that cannot be read: a directory.
    let output = StdCommand::new(assert_cmd::cargo::cargo_bin("bloomery"))
        .arg("add")
        .arg(&good)
        .stdin(fs::File::open(dir.path()).unwrap())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.starts_with("bloomery: <stdin>:") && stderr.lines().count() == 1,
        "{stderr}"
    );
}

/// A file the library wrote with items inserted as `&str`, `String` and `Vec<u8>` answers
/// `bloomery check` for each, and a file the tool wrote answers the library's typed calls.
#[test]
fn library_and_tool_agree_on_items_in_every_variant() {
    use bloomery::any::{self, Spec};
    use bloomery::format::native::Variant;

    let dir = TempDir::new().unwrap();
    let items = ["apple", "naïve 🦀", "", "https://example.com/a?b=c"];
    for variant in Variant::ALL {
        let mut filter = any::create(&Spec::new(variant, 1_000, 0.01)).unwrap();
        for item in items {
            filter.insert(item.as_bytes()).unwrap();
        }
        let path = dir.path().join(format!("lib-{variant}.bloom"));
        fs::write(&path, filter.envelope().to_vec()).unwrap();
        let out = stdout_of(bloomery().arg("check").arg(&path).args(items));
        let expected: String = items
            .iter()
            .map(|item| format!("probably present\t{item}\n"))
            .collect();
        assert_eq!(out, expected, "{variant}");

        let made = create(&dir, &format!("cli-{variant}.bloom"), variant.name(), 1_000);
        bloomery().arg("add").arg(&made).args(items).assert().success();
        let opened = any::open(&fs::read(&made).unwrap()).unwrap();
        assert_eq!(opened.variant(), variant);
        for item in items {
            assert!(opened.contains(item.as_bytes()), "{variant}: {item}");
        }
    }
    // The typed API: a blocked filter filled with &str, checked as bytes by the tool.
    let mut typed = bloomery::BlockedBloomFilter::with_fpp(100, 0.01).unwrap();
    typed.insert("apple");
    typed.insert(&String::from("pear"));
    typed.insert(&b"fig"[..]);
    let path = dir.path().join("typed.bloom");
    fs::write(&path, bloomery::format::native::Persist::to_bytes(&typed)).unwrap();
    bloomery()
        .arg("check")
        .arg("-q")
        .arg(&path)
        .args(["apple", "pear", "fig"])
        .assert()
        .success();
}

#[test]
fn integers_in_guava_long_and_int_form() {
    let dir = TempDir::new().unwrap();
    for variant in ["classic", "blocked"] {
        let path = create(&dir, &format!("{variant}.bloom"), variant, 1_000);
        bloomery()
            .args(["add", "--format", "long"])
            .arg(&path)
            .args(["42", "-7", "18446744073709551615"])
            .assert()
            .success();
        // -1 and 2^64 - 1 are the same 64 bits.
        bloomery()
            .args(["check", "-q", "--format", "long"])
            .arg(&path)
            .args(["42", "-7", "-1"])
            .assert()
            .success();
        // The same numbers as text or as 32-bit ints are other items.
        bloomery()
            .args(["check", "-q"])
            .arg(&path)
            .arg("42")
            .assert()
            .code(1);
        bloomery()
            .args(["check", "-q", "--format", "int"])
            .arg(&path)
            .arg("42")
            .assert()
            .code(1);
        bloomery()
            .args(["check", "-q", "--format", "hex"])
            .arg(&path)
            .arg("2a00000000000000")
            .assert()
            .success();
        let message = error_of(bloomery().args(["add", "--format", "long"]).arg(&path).arg("4x"));
        assert!(
            message.contains("argument 1: item '4x' is not a decimal 64-bit integer"),
            "{message}"
        );
        // In a file: its name and the line's number; a long line cut short.
        let lines = dir.path().join("lines");
        fs::write(&lines, format!("1\n2\n{}\n", "9".repeat(100_000))).unwrap();
        let message = error_of(
            bloomery()
                .args(["add", "--format", "long", "-i"])
                .arg(&lines)
                .arg(&path),
        );
        assert!(
            message.contains("lines, line 3: item '9999") && message.contains("... (100000 bytes)' is not"),
            "{message}"
        );
        assert!(message.ends_with("the 2 items before it were added"), "{message}");
        assert!(message.len() < 250, "{message}");
    }
    // A Guava BloomFilter<Long> of the same numbers is these bits: the library agrees.
    let mut guava_long = bloomery::BloomFilter::with_fpp(1_000, 0.01).unwrap();
    guava_long.insert(&42i64);
    let from_tool = bloomery::any::open(&fs::read(dir.path().join("classic.bloom")).unwrap()).unwrap();
    assert!(from_tool.contains(&42i64.to_le_bytes()));
}

#[test]
fn remove_takes_items_out_of_a_counting_filter_only() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "c.bloom", "counting", 1_000);
    bloomery()
        .arg("add")
        .arg(&path)
        .args(["a", "b"])
        .assert()
        .success();
    bloomery().arg("remove").arg(&path).arg("a").assert().success();
    let output = bloomery()
        .arg("check")
        .arg(&path)
        .args(["a", "b"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "absent\ta\nprobably present\tb\n"
    );
    let before = fs::read(&path).unwrap();
    let message = error_of(bloomery().arg("remove").arg(&path).args(["b", "never-added"]));
    assert!(
        message.contains("'never-added'") && message.contains("not in the filter"),
        "{message}"
    );
    assert_eq!(fs::read(&path).unwrap(), before, "a refused run saves nothing");
    let classic = create(&dir, "k.bloom", "classic", 1_000);
    let message = error_of(bloomery().arg("remove").arg(&classic).arg("a"));
    assert!(
        message.contains("classic filters do not support remove"),
        "{message}"
    );
}

#[test]
fn a_full_nonscaling_filter_refuses_items_with_an_error() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("full.bloom");
    bloomery()
        .args(["create", "--variant", "scalable", "--nonscaling", "--items", "10"])
        .arg(&path)
        .assert()
        .success();
    let before = fs::read(&path).unwrap();
    let message = error_of(bloomery().arg("add").arg(&path).write_stdin(lines("item-", 100)));
    assert!(
        message.contains("filter is full") && message.contains("nothing was saved"),
        "{message}"
    );
    assert_eq!(fs::read(&path).unwrap(), before);
}

/// A file whose checksums are right but whose parameters are not: `verify` and every
/// command that loads it refuse it.
#[test]
fn verify_checks_parameters_not_only_checksums() {
    use bloomery::format::native::{ParamWriter, Variant, encode};

    let dir = TempDir::new().unwrap();
    let blocked_params = |num_blocks: u64, lanes: u32, hasher: u32| {
        ParamWriter::new()
            .u64(num_blocks)
            .u32(lanes)
            .u32(hasher)
            .u64(0)
            .finish()
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "zero-hashes",
            encode(Variant::Classic, &ParamWriter::new().u32(0).finish(), &[0; 8]),
            "num_hashes",
        ),
        (
            "256-hashes",
            encode(Variant::Classic, &ParamWriter::new().u32(256).finish(), &[0; 8]),
            "num_hashes",
        ),
        (
            "lanes-7",
            encode(Variant::Blocked, &blocked_params(1, 7, 2), &[0; 64]),
            "lanes",
        ),
        (
            "hasher-9",
            encode(Variant::Blocked, &blocked_params(1, 8, 9), &[0; 64]),
            "hasher 9",
        ),
        (
            "foldhash",
            encode(Variant::Blocked, &blocked_params(1, 8, 1), &[0; 64]),
            "rebuild",
        ),
        (
            "blocks-2",
            encode(Variant::Blocked, &blocked_params(2, 8, 2), &[0; 64]),
            "blocks",
        ),
    ];
    for (name, bytes, expected) in cases {
        let path = dir.path().join(format!("{name}.bloom"));
        fs::write(&path, bytes).unwrap();
        for command in ["verify", "info"] {
            let message = error_of(bloomery().arg(command).arg(&path));
            assert!(message.contains(expected), "{name}, {command}: {message}");
        }
    }
}

#[test]
fn verify_accepts_a_good_file() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "good.bloom", "classic", 1000);
    let out = stdout_of(bloomery().arg("verify").arg(&path));
    assert!(out.starts_with("ok: "), "{out}");
}

#[test]
fn a_killed_add_leaves_a_sealed_or_unsealed_filter_with_every_earlier_item() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "big.bloom", "blocked", 2_000_000);
    bloomery().arg("add").arg(&path).arg("before").assert().success();
    let mut before = fs::read(&path).unwrap();
    for delay_ms in [5u64, 50, 200, 600] {
        let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("bloomery"))
            .arg("add")
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || {
            let chunk = lines("killed-", 100_000);
            let _ = stdin.write_all(chunk.as_bytes());
        });
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        writer.join().unwrap();
        // `add` updates the file in place: a kill leaves it sealed (the old filter, or the
        // new one if the run had finished) or unsealed (its bits a superset of the old
        // ones, status 3), never damaged (tests/faults.rs kills it at many more points).
        let verified = bloomery().arg("verify").arg(&path).output().unwrap();
        let status = verified.status.code();
        assert!(matches!(status, Some(0 | 3)), "verify: {verified:?}");
        let now = fs::read(&path).unwrap();
        if status == Some(0) && now != before {
            // Sealed and changed: the killed run finished, so every item of it made it.
            bloomery()
                .arg("check")
                .arg("-q")
                .arg(&path)
                .write_stdin(lines("killed-", 100_000))
                .assert()
                .success();
        }
        if status == Some(3) {
            bloomery().arg("seal").arg(&path).assert().success();
            bloomery().arg("verify").arg(&path).assert().success();
        }
        bloomery()
            .arg("check")
            .arg("-q")
            .arg(&path)
            .arg("before")
            .assert()
            .success();
        before = fs::read(&path).unwrap();
    }
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.contains(".tmp."))
        .collect();
    // A killed writer may leave its temporary file; it is never mistaken for the filter.
    assert!(
        leftovers.iter().all(|name| name.starts_with("big.bloom.tmp.")),
        "{leftovers:?}"
    );
}

#[test]
fn concurrent_adds_lose_nothing() {
    let dir = TempDir::new().unwrap();
    let path = create(&dir, "shared.bloom", "blocked", 200_000);
    let children: Vec<_> = (0..4)
        .map(|writer| {
            let mut child = StdCommand::new(assert_cmd::cargo::cargo_bin("bloomery"))
                .arg("add")
                .arg(&path)
                .stdin(Stdio::piped())
                .spawn()
                .unwrap();
            let mut stdin = child.stdin.take().unwrap();
            stdin
                .write_all(lines(&format!("writer{writer}-"), 20_000).as_bytes())
                .unwrap();
            drop(stdin);
            child
        })
        .collect();
    for mut child in children {
        assert!(child.wait().unwrap().success());
    }
    for writer in 0..4 {
        bloomery()
            .arg("check")
            .arg("-q")
            .arg(&path)
            .write_stdin(lines(&format!("writer{writer}-"), 20_000))
            .assert()
            .success();
    }
}

#[test]
fn every_subcommand_has_help() {
    for subcommand in [
        "create",
        "add",
        "check",
        "dedup",
        "info",
        "merge",
        "intersect",
        "export",
        "import",
        "verify",
    ] {
        bloomery().arg(subcommand).arg("--help").assert().success();
    }
}

/// A file larger than the resident window (`BLOOMERY_WINDOW_BYTES`, 1 GiB by default) is
/// updated a region at a time (block filters: the batch grouped by region) or in slices
/// (classic), and looked up with pages let go of: the same bits and answers as without.
#[test]
fn files_larger_than_the_window_get_the_same_bits_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let items: String = (0..300_000)
        .map(|i| format!("https://example.com/{i}\n"))
        .collect();
    for variant in ["blocked", "classic", "split-block"] {
        let whole = dir.path().join(format!("{variant}-whole.bloom"));
        let windowed = dir.path().join(format!("{variant}-windowed.bloom"));
        for path in [&whole, &windowed] {
            bloomery()
                .args(["create", "--variant", variant, "--items", "3000000"])
                .arg(path)
                .assert()
                .success();
        }
        bloomery()
            .arg("add")
            .arg(&whole)
            .write_stdin(items.clone())
            .assert()
            .success();
        bloomery()
            .env("BLOOMERY_WINDOW_BYTES", "1048576")
            .arg("add")
            .arg(&windowed)
            .write_stdin(items.clone())
            .assert()
            .success();
        assert_eq!(
            std::fs::read(&whole).unwrap(),
            std::fs::read(&windowed).unwrap(),
            "{variant}"
        );
        bloomery().arg("verify").arg(&windowed).assert().success();
        let checked = bloomery()
            .env("BLOOMERY_WINDOW_BYTES", "1048576")
            .args(["check", "--count"])
            .arg(&windowed)
            .write_stdin(items.clone())
            .assert()
            .success();
        assert_eq!(
            String::from_utf8_lossy(&checked.get_output().stdout),
            "300000 probably present, 0 absent\n"
        );
        // dedup in place with the window: nothing new to print, and new lines printed once.
        let more = format!(
            "{}fresh line\nfresh line\n",
            &items[..items.find("/20\n").unwrap() + 4]
        );
        let deduped = bloomery()
            .env("BLOOMERY_WINDOW_BYTES", "1048576")
            .args(["dedup", "--filter"])
            .arg(&windowed)
            .write_stdin(more)
            .assert()
            .success();
        assert_eq!(
            String::from_utf8_lossy(&deduped.get_output().stdout),
            "fresh line\n"
        );
    }
}

/// `BLOOMERY_TIMINGS` makes an add print its phases to standard error (scripts/scale.sh
/// shows them), the pass over a spilled payload among them; without it, nothing.
#[test]
fn bloomery_timings_prints_the_phases_of_an_add() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("timed.bloom");
    bloomery()
        .args(["create", "--items", "3000000"])
        .arg(&path)
        .assert()
        .success();
    let items: String = (0..10_000).map(|i| format!("item {i}\n")).collect();
    let timed = bloomery()
        .env("BLOOMERY_TIMINGS", "1")
        .env("BLOOMERY_WINDOW_BYTES", "1048576")
        .arg("add")
        .arg(&path)
        .write_stdin(items.clone())
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&timed.get_output().stderr).into_owned();
    for phase in [
        "opening",
        "reading the items",
        "of the pass:",
        "the pass over the payload",
        "sealing",
    ] {
        assert!(
            stderr.contains(&format!("bloomery: timing: {phase}")),
            "{phase}: {stderr}"
        );
    }
    let quiet = bloomery()
        .arg("add")
        .arg(&path)
        .write_stdin(items)
        .assert()
        .success();
    assert!(quiet.get_output().stderr.is_empty());
}

/// A spilled add keeps its hashes in a temporary file per region of the payload (up to
/// 1024), more than a common limit on open files allows. Under a lower limit it raises its
/// soft limit toward the hard one, or makes fewer files, each for several regions; either
/// way it sets the bits an add without a limit sets.
#[test]
fn spilled_adds_fit_the_limit_on_open_files() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    let items: String = (0..50_000).map(|i| format!("limited item {i}\n")).collect();
    // 3*10^6 items: a payload of about 3.8 MB; a window of 1 MiB makes regions of 64 KiB,
    // 64 of them (and so 64 spill files when nothing limits them).
    let add = |name: &str, limit: Option<(u64, u64)>| {
        let path = dir.path().join(name);
        bloomery()
            .args(["create", "--items", "3000000"])
            .arg(&path)
            .assert()
            .success();
        let mut command = StdCommand::new(assert_cmd::cargo::cargo_bin("bloomery"));
        command
            .env("BLOOMERY_WINDOW_BYTES", "1048576")
            .env("BLOOMERY_TIMINGS", "1")
            .arg("add")
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some((soft, hard)) = limit {
            // SAFETY: setrlimit is async-signal-safe, and the closure touches nothing else.
            unsafe {
                command.pre_exec(move || {
                    let limit = libc::rlimit {
                        rlim_cur: soft,
                        rlim_max: hard,
                    };
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        let mut child = command.spawn().expect("runs");
        // An add that fails before reading its input closes the pipe: its status says why.
        let _ = child.stdin.take().expect("piped").write_all(items.as_bytes());
        let output = child.wait_with_output().expect("waits");
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        assert!(output.status.success(), "{name}: {stderr}");
        assert!(
            stderr.contains("bloomery: timing: of the pass:"),
            "{name} spilled: {stderr}"
        );
        fs::read(&path).unwrap()
    };
    let unlimited = add("unlimited.bloom", None);
    assert_eq!(
        add("raised.bloom", Some((40, 4096))),
        unlimited,
        "soft limit raised"
    );
    assert_eq!(add("fewer-files.bloom", Some((40, 40))), unlimited, "fewer files");
}

/// `merge --force a a b` ORs b into a where it lies (the classic, blocked and split-block
/// variants); a file of another shape is refused before anything changes; merging into a
/// new output still writes a new file.
#[test]
fn merge_into_one_of_its_inputs_is_in_place() {
    let dir = tempfile::tempdir().unwrap();
    for variant in ["blocked", "classic", "split-block"] {
        let a = dir.path().join(format!("{variant}-a.bloom"));
        let b = dir.path().join(format!("{variant}-b.bloom"));
        let other = dir.path().join(format!("{variant}-other.bloom"));
        for (path, items) in [(&a, "1000"), (&b, "1000"), (&other, "5000")] {
            bloomery()
                .args(["create", "--variant", variant, "--items", items])
                .arg(path)
                .assert()
                .success();
        }
        bloomery().arg("add").arg(&a).arg("in-a").assert().success();
        bloomery().arg("add").arg(&b).arg("in-b").assert().success();
        let inode = |path: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).unwrap());
        let before = inode(&a);
        bloomery()
            .args(["merge", "--force"])
            .arg(&a)
            .arg(&a)
            .arg(&b)
            .assert()
            .success();
        assert_eq!(inode(&a), before, "{variant}: not replaced");
        bloomery().arg("verify").arg(&a).assert().success();
        bloomery()
            .arg("check")
            .arg(&a)
            .args(["in-a", "in-b"])
            .assert()
            .success();
        let snapshot = fs::read(&a).unwrap();
        let refused = bloomery()
            .args(["merge", "--force"])
            .arg(&a)
            .arg(&a)
            .arg(&other)
            .assert()
            .code(2);
        let stderr = String::from_utf8_lossy(&refused.get_output().stderr).into_owned();
        assert!(stderr.contains("incompatible"), "{stderr}");
        assert_eq!(fs::read(&a).unwrap(), snapshot, "{variant}: unchanged");
        bloomery().arg("verify").arg(&a).assert().success();
    }
}

/// An in-place merge of more inputs than the process may keep open at once: each input is
/// open only while it is checked and while it is OR-ed in. With 64 open files at most,
/// merging 100 inputs into one of them failed ("Too many open files") where a merge into a
/// new file took them.
#[test]
fn an_in_place_merge_takes_more_inputs_than_files_may_be_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for index in 0..100 {
        let path = dir.path().join(format!("f{index}.bloom"));
        bloomery()
            .args(["create", "--items", "1000"])
            .arg(&path)
            .assert()
            .success();
        bloomery()
            .arg("add")
            .arg(&path)
            .arg(format!("item-{index}"))
            .assert()
            .success();
        inputs.push(path);
    }
    let binary = assert_cmd::cargo::cargo_bin("bloomery");
    let output = Command::new("sh")
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" merge --force \"$@\"")
        .arg(&binary)
        .arg(&inputs[0])
        .args(&inputs)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let items: Vec<String> = (0..100).map(|index| format!("item-{index}")).collect();
    bloomery()
        .arg("check")
        .arg(&inputs[0])
        .args(&items)
        .assert()
        .success();
    bloomery().arg("verify").arg(&inputs[0]).assert().success();
}

/// "-" names standard input or output (`-i -`, `export f -`), never a filter file to
/// write: `create -`, `merge - a.bloom`, `import x -`, `add -` and the other writers refuse
/// it, saying how to name a file "-" (`./-`), and make no file. They once silently made
/// or changed a file named "-".
#[test]
fn a_dash_is_not_a_filter_file_to_write() {
    let dir = TempDir::new().unwrap();
    let a = create(&dir, "a.bloom", "blocked", 100);
    let guava = dir.path().join("a.guava");
    let classic = create(&dir, "c.bloom", "classic", 100);
    bloomery()
        .arg("export")
        .arg(&classic)
        .arg(&guava)
        .assert()
        .success();
    let runs: [&[&std::ffi::OsStr]; 9] = [
        &["create".as_ref(), "-".as_ref()],
        &["merge".as_ref(), "-".as_ref(), a.as_os_str()],
        &["intersect".as_ref(), "-".as_ref(), a.as_os_str()],
        &["import".as_ref(), guava.as_os_str(), "-".as_ref()],
        &["add".as_ref(), "-".as_ref(), "x".as_ref()],
        &["remove".as_ref(), "-".as_ref(), "x".as_ref()],
        &["dedup".as_ref(), "--filter".as_ref(), "-".as_ref()],
        &["seal".as_ref(), "-".as_ref()],
        // Even where a file named "-" exists: `./-` names it.
        &["add".as_ref(), "-".as_ref(), "x".as_ref()],
    ];
    for (index, args) in runs.iter().enumerate() {
        if index == runs.len() - 1 {
            bloomery()
                .current_dir(dir.path())
                .args(["create", "-n", "100", "./-"])
                .assert()
                .success();
        }
        let before = fs::read(dir.path().join("-")).ok();
        let message = error_of(bloomery().current_dir(dir.path()).args(*args).write_stdin("x\n"));
        assert!(message.contains("write ./-"), "{args:?}: {message}");
        assert_eq!(fs::read(dir.path().join("-")).ok(), before, "{args:?}");
    }
    // `./-` is the file, and `export f -` still writes to standard output.
    bloomery()
        .current_dir(dir.path())
        .args(["add", "./-", "x"])
        .assert()
        .success();
    let exported = bloomery().arg("export").arg(&classic).arg("-").output().unwrap();
    assert!(exported.status.success() && !exported.stdout.is_empty());
}

/// What the README says of errors: status 2, one line; a command line the parser refuses
/// is status 2 with the parser's few lines (the error, the usage, a hint). `check` and
/// `verify` say their statuses in their help, 2 included.
#[test]
fn usage_errors_are_status_2_and_the_helps_say_the_statuses() {
    let refused = bloomery().args(["check", "--bogus"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.lines().count() > 1 && stderr.contains("Usage:"),
        "{stderr}"
    );
    for (subcommand, said) in [
        ("check", "1 otherwise, 2 on an error"),
        ("verify", "2 on an error"),
    ] {
        let help = stdout_of(bloomery().arg(subcommand).arg("--help"));
        assert!(help.replace('\n', " ").contains(said), "{subcommand}: {help}");
    }
    // The Redis options are global, so clap lists them under every command: under a
    // heading naming the commands that take them (`verify --help` listed `--redis` among
    // its own options, and `verify` refuses it).
    let help = stdout_of(bloomery().args(["verify", "--help"]));
    let (own, remote) = help
        .split_once("Sharded filter on Redis (create, add, check, dedup and info only):")
        .expect("the heading");
    assert!(!own.contains("--redis") && remote.contains("--redis"), "{help}");
}
