//! The CLI under faults (issue 12, docs/failure-model.md): writes through symlinks, to
//! devices and FIFOs, into read-only files and directories, on a full disk, with stdout
//! closed or full, with a file truncated while mapped, concurrent writers, and `kill -9` at
//! random points of `add`, `merge` and `dedup --filter`. Every run must end with exit
//! status 0, 1 or 2 and at most one line on stderr, never a panic or an abort; after every
//! kill `verify` finds the file valid, or unsealed (an update in place was killed: its bits
//! valid, status 3), never damaged, and the next writer or `seal` seals it; mode, owner and
//! symlinks stay as they were; no item acknowledged by a finished `add` is lost.
//!
//! Tests that need root (chown, a tmpfs mount, running as another user) say so and pass
//! without checking anything where they cannot run.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_bloomery");
const NOBODY: u32 = 65534;

fn bloomery() -> Command {
    Command::new(BIN)
}

/// A directory that other users may enter (tempfile's are 0700).
fn open_dir() -> TempDir {
    let dir = TempDir::new().expect("temporary directory");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

fn is_root() -> bool {
    fs::metadata("/proc/self").is_ok_and(|metadata| metadata.uid() == 0)
}

/// What every run must end as: status 0, 1 or 2 (not a signal, not 101 from a panic), and
/// at most one line on stderr without a panic message.
fn assert_clean_end(output: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        matches!(output.status.code(), Some(0..=2)),
        "{what}: status {:?}, stderr: {stderr}",
        output.status
    );
    assert!(
        stderr.lines().count() <= 1,
        "{what}: more than one line: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{what}: {stderr}");
}

/// Asserts the run printed nothing on stderr (no warning, no note).
fn assert_quiet(output: &Output) {
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Runs and returns the one-line error of a run that must fail with status 2.
fn error_of(command: &mut Command) -> String {
    let output = command.output().expect("runs");
    assert_clean_end(&output, "error run");
    assert_eq!(
        output.status.code(),
        Some(2),
        "expected status 2; stdout {} stderr {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr).trim_end().to_owned();
    assert!(stderr.starts_with("bloomery: "), "{stderr}");
    stderr
}

fn ok(command: &mut Command) -> Output {
    let output = command.output().expect("runs");
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn create(path: &Path, items: u64) {
    ok(bloomery()
        .args(["create", "--items", &items.to_string(), "--fpp", "0.01"])
        .arg(path));
}

fn add(path: &Path, items: &[&str]) {
    ok(bloomery().arg("add").arg(path).args(items));
}

fn all_present(path: &Path, items: &[String]) -> bool {
    let mut child = bloomery()
        .args(["check", "-q"])
        .arg(path)
        .stdin(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut stdin = child.stdin.take().expect("piped");
    for item in items {
        writeln!(stdin, "{item}").expect("write");
    }
    drop(stdin);
    child.wait().expect("waits").code() == Some(0)
}

fn verify(path: &Path) {
    ok(bloomery().arg("verify").arg(path));
}

/// Runs `verify`: true when the file is unsealed (status 3, "unsealed" said), false when it
/// is sealed and valid (status 0); anything else (a damaged header or payload) fails.
fn verify_sealed_or_unsealed(path: &Path) -> bool {
    let output = bloomery().arg("verify").arg(path).output().expect("runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    match output.status.code() {
        Some(0) => {
            assert!(stdout.starts_with("ok: "), "{stdout}");
            false
        }
        Some(3) => {
            assert!(
                stdout.starts_with("unsealed (bits valid, checksum stale; run `bloomery seal`)"),
                "{stdout}"
            );
            true
        }
        other => panic!("verify: status {other:?}: {stdout}{stderr}"),
    }
}

/// Files in `dir` other than `keep`: no lock files, no temporary files left behind.
fn leftovers(dir: &Path, keep: &[&str]) -> Vec<String> {
    fs::read_dir(dir)
        .expect("lists")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| !keep.contains(&name.as_str()))
        .collect()
}

#[test]
fn writing_through_a_symlink_updates_its_target_and_keeps_the_link() {
    let dir = open_dir();
    let target = dir.path().join("real.bloom");
    create(&target, 1000);
    let link = dir.path().join("link.bloom");
    symlink("real.bloom", &link).expect("symlink");
    add(&link, &["through-the-link"]);
    assert!(
        fs::symlink_metadata(&link)
            .expect("exists")
            .file_type()
            .is_symlink()
    );
    assert!(all_present(&target, &["through-the-link".into()]));
    // Every writer does the same: dedup --filter, merge --force, import --force.
    let other = dir.path().join("other.bloom");
    create(&other, 1000);
    add(&other, &["from-other"]);
    ok(bloomery()
        .args(["merge", "--force"])
        .arg(&link)
        .arg(&link)
        .arg(&other));
    let mut dedup = bloomery()
        .args(["dedup", "--filter"])
        .arg(&link)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("runs");
    dedup
        .stdin
        .take()
        .expect("piped")
        .write_all(b"deduped\n")
        .expect("write");
    assert!(dedup.wait().expect("waits").success());
    assert!(
        fs::symlink_metadata(&link)
            .expect("exists")
            .file_type()
            .is_symlink()
    );
    let wanted: Vec<String> = ["through-the-link", "from-other", "deduped"]
        .map(String::from)
        .into();
    assert!(all_present(&target, &wanted));
    assert_eq!(
        leftovers(dir.path(), &["real.bloom", "link.bloom", "other.bloom"]),
        Vec::<String>::new()
    );
    // A link to nothing is refused rather than followed into a new file.
    let dangling = dir.path().join("dangling.bloom");
    symlink("missing.bloom", &dangling).expect("symlink");
    let message = error_of(bloomery().args(["create", "--items", "10"]).arg(&dangling));
    assert!(message.contains("does not exist"), "{message}");
    assert!(!dir.path().join("missing.bloom").exists());
}

#[test]
fn devices_fifos_and_directories_are_refused_and_left_as_they_were() {
    let dir = open_dir();
    let filter = dir.path().join("f.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "--items", "100"])
        .arg(&filter));
    let fifo = dir.path().join("fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let subdir = dir.path().join("sub");
    fs::create_dir(&subdir).expect("mkdir");
    let null_link = dir.path().join("null-link");
    symlink("/dev/null", &null_link).expect("symlink");
    for target in [
        Path::new("/dev/full"),
        Path::new("/dev/null"),
        &fifo,
        &subdir,
        &null_link,
    ] {
        let before = fs::metadata(target).expect("exists");
        let out = dir.path().join("out.bloom");
        for args in [
            vec!["create", "--force", "--items", "10"],
            vec!["merge", "--force"],
            vec!["add"],
            vec!["export", "--force"],
            // Readers refuse them too, without waiting for a FIFO's writer (hence
            // `timeout`: they once waited forever).
            vec!["check"],
            vec!["info"],
            vec!["verify"],
            vec!["export"],
            vec!["merge"],
        ] {
            let mut command = Command::new("timeout");
            command.arg("20").arg(BIN).args(&args);
            match (args[0], args.contains(&"--force")) {
                ("merge", true) => command.arg(target).arg(&filter),
                ("merge", false) => command.arg(&out).arg(&filter).arg(target),
                ("export", true) => command.arg(&filter).arg(target),
                ("export", false) => command.arg(target).arg(&out),
                ("add" | "check", _) => command.arg(target).arg("x"),
                _ => command.arg(target),
            };
            let message = error_of(&mut command);
            assert!(
                message.contains("not a filter file") || message.contains("Is a directory"),
                "{args:?} {}: {message}",
                target.display()
            );
            assert!(!out.exists());
        }
        let after = fs::metadata(target).expect("still exists");
        assert_eq!(before.file_type(), after.file_type(), "{}", target.display());
        assert_eq!(before.ino(), after.ino(), "{}", target.display());
    }
    assert!(
        fs::symlink_metadata(&null_link)
            .expect("exists")
            .file_type()
            .is_symlink()
    );
    // `-` is standard output for export: the Guava bytes as a stream.
    let output = ok(bloomery().arg("export").arg(&filter).arg("-"));
    let exported = dir.path().join("exported.guava");
    ok(bloomery().arg("export").arg(&filter).arg(&exported));
    assert_eq!(output.stdout, fs::read(&exported).expect("reads"));
}

#[test]
fn items_from_a_named_pipe_are_read_from_its_one_opening() {
    // `-i` files are opened before the first item is used. A named pipe opened, closed and
    // opened again lost what a quick writer (`printf ... > fifo`) had written before the
    // close, and then waited for a writer that had gone (hence `timeout`); that happened
    // in some runs only, so the test makes forty.
    let dir = open_dir();
    let filter = dir.path().join("f.bloom");
    create(&filter, 10_000);
    let fifo = dir.path().join("items.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo")
            .success()
    );
    let mut added = Vec::new();
    for round in 0..40 {
        let items: Vec<String> = (0..3).map(|i| format!("piped-{round}-{i}")).collect();
        let text: String = items.iter().map(|item| format!("{item}\n")).collect();
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || fs::write(&fifo, text))
        };
        let output = Command::new("timeout")
            .arg("10")
            .arg(BIN)
            .arg("add")
            .arg(&filter)
            .arg("-i")
            .arg(&fifo)
            .output()
            .expect("runs");
        assert_clean_end(&output, "add -i FIFO");
        assert!(output.status.success(), "round {round}: {output:?}");
        let written = writer.join().expect("writer");
        assert!(written.is_ok(), "round {round}: the reader left: {written:?}");
        added.extend(items);
    }
    assert!(all_present(&filter, &added));
}

#[test]
fn more_item_files_than_open_descriptors_are_read_one_at_a_time() {
    // Named pipes are kept open from the check to the read (above); regular files are not,
    // so 300 of them under `ulimit -n 64` are read as before.
    let dir = open_dir();
    let filter = dir.path().join("f.bloom");
    create(&filter, 10_000);
    let mut command = String::from("ulimit -n 64 && exec \"$0\" add \"$1\"");
    let mut items = Vec::new();
    for i in 0..300 {
        let path = dir.path().join(format!("items-{i}.txt"));
        fs::write(&path, format!("file-item-{i}\n")).expect("writes");
        command.push_str(&format!(" -i '{}'", path.display()));
        items.push(format!("file-item-{i}"));
    }
    ok(Command::new("sh").arg("-c").arg(&command).arg(BIN).arg(&filter));
    assert!(all_present(&filter, &items));
}

#[test]
fn existing_outputs_are_replaced_only_with_force() {
    let dir = open_dir();
    let a = dir.path().join("a.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "--items", "100"])
        .arg(&a));
    let guava = dir.path().join("a.guava");
    ok(bloomery().arg("export").arg(&a).arg(&guava));
    let existing = dir.path().join("existing");
    for (args, output) in [
        (vec!["merge".into(), existing.clone(), a.clone()], &existing),
        (vec!["intersect".into(), existing.clone(), a.clone()], &existing),
        (vec!["import".into(), guava.clone(), existing.clone()], &existing),
        (vec!["export".into(), a.clone(), existing.clone()], &existing),
    ] {
        fs::write(output, b"precious").expect("writes");
        let message = error_of(bloomery().args(&args));
        assert!(message.contains("already exists (use --force"), "{message}");
        assert_eq!(fs::read(output).expect("reads"), b"precious");
        ok(bloomery().args(&args).arg("--force"));
        assert_ne!(fs::read(output).expect("reads"), b"precious");
    }
}

#[test]
fn rewrites_keep_mode_and_owner() {
    if !is_root() {
        eprintln!("skipped: needs root to give files another owner");
        return;
    }
    let dir = open_dir();
    let path = dir.path().join("owned.bloom");
    create(&path, 1000);
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).expect("chown");
    for mode in [0o600, 0o640, 0o444] {
        fs::set_permissions(&path, fs::Permissions::from_mode(mode)).expect("chmod");
        add(&path, &[&format!("mode {mode:o}")]);
        let metadata = fs::metadata(&path).expect("exists");
        assert_eq!(metadata.permissions().mode() & 0o7777, mode);
        assert_eq!((metadata.uid(), metadata.gid()), (NOBODY, NOBODY));
    }
    ok(bloomery().args(["create", "--force", "--items", "50"]).arg(&path));
    let metadata = fs::metadata(&path).expect("exists");
    assert_eq!(
        (metadata.uid(), metadata.gid(), metadata.mode() & 0o7777),
        (NOBODY, NOBODY, 0o444)
    );
}

/// `command` run as the user `nobody`, where this test can switch users.
fn as_nobody(args: &[&std::ffi::OsStr]) -> Option<Command> {
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        return None;
    }
    let mut command = Command::new("/usr/bin/setpriv");
    command
        .args([
            "--reuid",
            &NOBODY.to_string(),
            "--regid",
            &NOBODY.to_string(),
            "--clear-groups",
            BIN,
        ])
        .args(args);
    Some(command)
}

/// `seal` of a sealed file checks it and leaves it as it is: read, without write access,
/// nothing allocated. It once opened the file for writing and reserved the payload's disk
/// blocks (`fallocate`) before it looked at the header: a sealed file failed on a full disk
/// ("cannot allocate the filter's N bytes on disk") and for a user who may only read it,
/// and a sealed sparse file lost its holes.
#[test]
fn seal_of_a_sealed_file_reads_it_and_changes_nothing() {
    use std::os::fd::AsRawFd;
    let dir = open_dir();
    let path = dir.path().join("sealed.bloom");
    create(&path, 1_000_000);
    let len = fs::metadata(&path).expect("exists").len();
    // The payload (zeros, as created) made a hole: the file is as valid and sealed as
    // before, and holds a few blocks.
    let file = fs::OpenOptions::new().write(true).open(&path).expect("opens");
    // SAFETY: fallocate on the test's own open file; punching a hole keeps its size.
    let punched = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            4096,
            len as libc::off_t - 4096,
        )
    } == 0;
    drop(file);
    verify(&path);
    let blocks = fs::metadata(&path).expect("exists").blocks();
    let sealed = ok(bloomery().arg("seal").arg(&path));
    assert_quiet(&sealed);
    assert!(
        String::from_utf8_lossy(&sealed.stdout).contains("already sealed; payload checksum valid"),
        "{}",
        String::from_utf8_lossy(&sealed.stdout)
    );
    if punched {
        assert_eq!(
            fs::metadata(&path).expect("exists").blocks(),
            blocks,
            "the sealed file's blocks were allocated"
        );
    } else {
        eprintln!("skipped the sparse check: this file system punches no holes");
    }
    // A user who may read the file but not write it: a classic file (in place), and a
    // scalable one (written whole, which `seal` checks as `verify` does).
    let whole = dir.path().join("whole.bloom");
    ok(bloomery()
        .args(["create", "--variant", "scalable", "-n", "1000"])
        .arg(&whole));
    let classic = dir.path().join("classic.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "-n", "1000"])
        .arg(&classic));
    for (path, said) in [(&classic, "already sealed"), (&whole, "ok: ")] {
        fs::set_permissions(path, fs::Permissions::from_mode(0o444)).expect("chmod");
        let before = fs::read(path).expect("reads");
        let Some(mut command) = as_nobody(&["seal".as_ref(), path.as_os_str()]) else {
            eprintln!("skipped the read-only check: needs root and setpriv");
            return;
        };
        let output = ok(&mut command);
        assert!(
            String::from_utf8_lossy(&output.stdout).contains(said),
            "{}",
            String::from_utf8_lossy(&output.stdout)
        );
        assert_eq!(fs::read(path).expect("reads"), before);
    }
}

#[test]
fn a_file_or_directory_its_user_may_not_write_is_refused_and_unchanged() {
    let dir = open_dir();
    std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).ok();
    let path = dir.path().join("readonly.bloom");
    create(&path, 1000);
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).ok();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o444)).expect("chmod");
    let Some(mut command) = as_nobody(&["add".as_ref(), path.as_os_str(), "x".as_ref()]) else {
        eprintln!("skipped: needs root and setpriv to run as another user");
        return;
    };
    let before = fs::read(&path).expect("reads");
    let message = error_of(&mut command);
    assert!(message.contains("Permission denied"), "{message}");
    assert_eq!(fs::read(&path).expect("reads"), before);
    assert_eq!(fs::metadata(&path).expect("exists").mode() & 0o7777, 0o444);

    // Writable by its group-less other users but owned by root: a rewrite by `nobody`
    // would change its owner, so it is refused (a counting filter, replaced on update); a
    // blocked one is updated in place and keeps its owner.
    let shared = dir.path().join("shared.bloom");
    ok(bloomery()
        .args(["create", "--variant", "counting", "--items", "1000"])
        .arg(&shared));
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o666)).expect("chmod");
    let message =
        error_of(&mut as_nobody(&["add".as_ref(), shared.as_os_str(), "x".as_ref()]).expect("checked"));
    assert!(message.contains("cannot keep its owner 0:0"), "{message}");
    assert_eq!(fs::metadata(&shared).expect("exists").uid(), 0);
    let in_place = dir.path().join("in-place.bloom");
    create(&in_place, 1000);
    fs::set_permissions(&in_place, fs::Permissions::from_mode(0o666)).expect("chmod");
    ok(&mut as_nobody(&["add".as_ref(), in_place.as_os_str(), "x".as_ref()]).expect("checked"));
    assert_eq!(fs::metadata(&in_place).expect("exists").uid(), 0);
    assert!(all_present(&in_place, &["x".into()]));

    // A read-only directory: the file is writable, but no new file can replace it (a
    // counting filter); a blocked filter is updated in place, in the file itself.
    std::os::unix::fs::chown(&shared, Some(NOBODY), Some(NOBODY)).expect("chown");
    let before_shared = fs::read(&shared).expect("reads");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).expect("chmod");
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o555)).expect("chmod");
    let message =
        error_of(&mut as_nobody(&["add".as_ref(), shared.as_os_str(), "x".as_ref()]).expect("checked"));
    assert!(
        message.contains("cannot create a file in its directory") && message.contains("Permission denied"),
        "{message}"
    );
    assert_eq!(fs::read(&shared).expect("reads"), before_shared);
    ok(&mut as_nobody(&["add".as_ref(), path.as_os_str(), "x".as_ref()]).expect("checked"));
    assert!(all_present(&path, &["x".into()]));
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).expect("chmod");
    assert_eq!(
        leftovers(dir.path(), &["readonly.bloom", "shared.bloom", "in-place.bloom"]),
        Vec::<String>::new()
    );
}

/// A small tmpfs, unmounted on drop; `None` where mounting is not allowed.
struct SmallDisk {
    dir: TempDir,
}

impl SmallDisk {
    fn mount(bytes: u64) -> Option<Self> {
        let dir = open_dir();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Self { dir })
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_full_disk_leaves_the_old_file_and_no_temporary_file() {
    let Some(disk) = SmallDisk::mount(4 << 20) else {
        eprintln!("skipped: needs permission to mount a tmpfs");
        return;
    };
    let dir = disk.dir.path();
    let path = dir.join("f.bloom");
    create(&path, 1_000_000); // 1.2 MB
    add(&path, &["before"]);
    // Fill the disk but for less than another copy of the filter.
    let filler = vec![0u8; 1 << 20];
    let mut file = fs::File::create(dir.join("filler")).expect("creates");
    let mut written = 0u64;
    while file.write_all(&filler).is_ok() {
        written += filler.len() as u64;
        assert!(written < 8 << 20);
    }
    drop(file);
    let len = fs::metadata(dir.join("filler")).expect("exists").len();
    fs::OpenOptions::new()
        .write(true)
        .open(dir.join("filler"))
        .expect("opens")
        .set_len(len - (512 << 10))
        .expect("shrinks");
    // An add updates the blocked filter in place, in blocks reserved when it was created:
    // it needs no room.
    add(&path, &["x"]);
    assert!(all_present(&path, &["before".into(), "x".into()]));
    let before = fs::read(&path).expect("reads");
    // A merge into one of its inputs is in place too (here, of the file with itself: no
    // change).
    ok(bloomery().args(["merge", "--force"]).arg(&path).arg(&path));
    assert_eq!(fs::read(&path).expect("reads"), before);
    assert_eq!(leftovers(dir, &["f.bloom", "filler"]), Vec::<String>::new());
    // So does an add to a filter replaced on update (a counting one).
    let counting = dir.join("counting.bloom");
    fs::remove_file(dir.join("filler")).expect("removes");
    ok(bloomery()
        .args(["create", "--variant", "counting", "--items", "300000"])
        .arg(&counting));
    let mut file = fs::File::create(dir.join("filler")).expect("creates");
    while file.write_all(&filler).is_ok() {}
    drop(file);
    let len = fs::metadata(dir.join("filler")).expect("exists").len();
    fs::OpenOptions::new()
        .write(true)
        .open(dir.join("filler"))
        .expect("opens")
        .set_len(len - (64 << 10))
        .expect("shrinks");
    let counting_before = fs::read(&counting).expect("reads");
    let message = error_of(bloomery().arg("add").arg(&counting).arg("y"));
    assert!(
        message.contains("No space left on device") && message.contains("; left unchanged"),
        "{message}"
    );
    assert_eq!(fs::read(&counting).expect("reads"), counting_before);
    assert_eq!(
        leftovers(dir, &["f.bloom", "filler", "counting.bloom"]),
        Vec::<String>::new()
    );
    fs::remove_file(&counting).expect("removes");
    // A new filter larger than the space left is refused before anything is written;
    // forced past the check, it fails cleanly and leaves nothing.
    let big = dir.join("big.bloom");
    let message = error_of(bloomery().args(["create", "--items", "10000000"]).arg(&big));
    assert!(
        message.contains("more than the disk space available"),
        "{message}"
    );
    let message = error_of(
        bloomery()
            .args(["create", "--no-space-check", "--items", "10000000"])
            .arg(&big),
    );
    assert!(
        message.contains("No space left on device") && message.ends_with("; nothing was created"),
        "{message}"
    );
    assert_eq!(leftovers(dir, &["f.bloom", "filler"]), Vec::<String>::new());
    verify(&path);
}

#[test]
fn a_file_whose_load_takes_more_than_memory_is_refused_before_reading() {
    // A blocked filter file of 512 MiB (sparse, its blocks reserved on disk), loaded whole
    // (`export`, `merge`) by a tool whose address space leaves it some 1.5 times the file:
    // the load holds the file's bytes and the filter made from them, twice the file, and
    // is refused before reading. The check once counted the file once (which fits), and the
    // load read it all, then needed as much again. (This test once sized the file from the
    // machine's memory, three quarters of it, and failed on a runner with less free disk.)
    // The export asks for a format a blocked filter does not have: the refusal comes first.
    let dir = open_dir();
    let path = dir.path().join("big.bloom");
    let items = ((512u64 << 20) * 8 / 11).to_string();
    ok(bloomery().args(["create", "--items", &items]).arg(&path));
    let len = fs::metadata(&path).unwrap().len();
    assert!(len > 400 << 20 && len < 600 << 20, "{len} bytes");
    // What the process maps before it loads (a few MB) counts against the limit too: the
    // 64 MiB above 1.5 times the file leave it between the file and twice the file.
    let limit = len + len / 2 + (64 << 20);
    let started = Instant::now();
    let message = error_of(with_address_space(
        bloomery()
            .args(["export", "--format", "parquet-sbbf"])
            .arg(&path)
            .arg(dir.path().join("out")),
        limit,
    ));
    assert!(
        message.contains(&format!("loading it takes {} bytes for a moment", 2 * len)),
        "{message}"
    );
    let message = error_of(with_address_space(
        bloomery()
            .args(["merge"])
            .arg(dir.path().join("merged.bloom"))
            .arg(&path)
            .arg(&path),
        limit,
    ));
    assert!(
        message.contains(&format!("loading it takes {} bytes for a moment", 2 * len)),
        "{message}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // With room for the load, the same merge runs.
    let output = with_address_space(
        bloomery()
            .args(["merge"])
            .arg(dir.path().join("merged.bloom"))
            .arg(&path)
            .arg(&path),
        4 * len,
    )
    .output()
    .expect("runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `check` and `info` answer a counting (scalable, rotating, ...) file from a copy built in
/// memory, which they allocated unchecked: under an address space with room for the
/// mapping and half as much again, both aborted (status 134, "memory allocation of N bytes
/// failed") where `verify` refused. Now refused the same way, before the copy; a classic
/// file of the same size, answered from its mapping, is still checked under that limit.
#[test]
fn check_and_info_of_a_file_whose_copy_does_not_fit_in_memory_are_refused() {
    let dir = open_dir();
    let counting = dir.path().join("counting.bloom");
    ok(bloomery()
        .args([
            "create",
            "--variant",
            "counting",
            "--items",
            "50000000",
            "--fpp",
            "0.1",
        ])
        .arg(&counting));
    let len = fs::metadata(&counting).unwrap().len();
    let limit = len + len / 2;
    for args in [&["check", "-q"][..], &["info"][..]] {
        let mut command = bloomery();
        command.args(args).arg(&counting);
        if args[0] == "check" {
            command.arg("x");
        }
        let message = error_of(with_address_space(&mut command, limit));
        assert!(
            message.contains(&format!(
                "a counting filter is answered from a copy in memory, which takes {len} bytes, \
                 more than the memory it may use"
            )),
            "{args:?}: {message}"
        );
    }
    // Answered from the mapping: no copy, not refused.
    let classic = dir.path().join("classic.bloom");
    // A classic filter takes a bit per counting filter's 4-bit counter: a quarter (a
    // little more items, for at least as many bytes).
    ok(bloomery()
        .args([
            "create",
            "--variant",
            "classic",
            "--items",
            "201000000",
            "--fpp",
            "0.1",
        ])
        .arg(&classic));
    let classic_len = fs::metadata(&classic).unwrap().len();
    assert!(classic_len >= len, "{classic_len} < {len}");
    let output = with_address_space(bloomery().args(["check", "-q"]).arg(&classic).arg("x"), limit)
        .output()
        .expect("runs");
    assert_clean_end(&output, "check of a classic file");
    assert_eq!(output.status.code(), Some(1));
}

#[test]
fn a_filter_too_big_for_memory_or_max_bytes_is_refused_before_allocating() {
    let dir = open_dir();
    let path = dir.path().join("huge.bloom");
    let started = Instant::now();
    // Built in memory (a counting filter): refused past the memory. A blocked filter is
    // written sparse and updated in place, so only the disk limits it.
    for items in ["5000000000", "10000000000"] {
        let message = error_of(
            bloomery()
                .args([
                    "create",
                    "--variant",
                    "counting",
                    "--items",
                    items,
                    "--fpp",
                    "0.01",
                ])
                .arg(&path),
        );
        assert!(message.contains("more than the memory it may use"), "{message}");
    }
    let message = error_of(
        bloomery()
            .args([
                "create",
                "--items",
                "1000",
                "--fpp",
                "1e-15",
                "--max-bytes",
                "1000000000",
            ])
            .arg(&path),
    );
    assert!(message.contains("more than --max-bytes"), "{message}");
    let message = error_of(
        bloomery()
            .args(["create", "--items", "1000000", "--max-bytes", "1000000"])
            .arg(&path),
    );
    assert!(message.contains("more than --max-bytes 1000000"), "{message}");
    let message = error_of(
        bloomery()
            .args(["dedup", "--items", "1000000", "--max-bytes", "1000"])
            .stdin(Stdio::null()),
    );
    assert!(message.contains("more than --max-bytes 1000"), "{message}");
    assert!(!path.exists());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "checked without allocating"
    );
}

/// A classic, blocked or split-block filter is created as its header and a hole, without
/// allocating the filter: one far larger than the address space the process may have is
/// made. Allocated (untouched) before, it was refused under `ulimit -v` ("cannot allocate
/// 1275812480 bytes for the filter: the system refused them"), as it is by a kernel whose
/// commit limit it passes; README promises a 12 GB filter without 12 GB of memory.
#[test]
fn a_filter_larger_than_the_address_space_is_created_without_allocating_it() {
    let dir = open_dir();
    let limit = 400 << 20;
    for variant in ["blocked", "classic", "split-block"] {
        let path = dir.path().join(format!("{variant}.bloom"));
        ok(with_address_space(
            bloomery()
                .args([
                    "create",
                    "--variant",
                    variant,
                    "--items",
                    "1000000000",
                    "--fpp",
                    "0.01",
                ])
                .arg(&path),
            limit,
        ));
        // The library's empty file of that spec: its header, then zeros.
        let spec = bloomery::any::Spec::new(
            bloomery::format::native::Variant::from_name(variant).unwrap(),
            1_000_000_000,
            0.01,
        );
        let empty = bloomery::any::empty_file(&spec).unwrap().unwrap();
        let len = fs::metadata(&path).unwrap().len();
        assert_eq!(len, empty.len, "{variant}");
        assert!(len > 2 * limit, "{variant}: {len} bytes");
        let mut header = vec![0; empty.header.len()];
        std::io::Read::read_exact(&mut fs::File::open(&path).unwrap(), &mut header).unwrap();
        assert_eq!(header, empty.header, "{variant}");
        fs::remove_file(&path).unwrap();
    }
}

#[test]
fn a_growing_filter_stops_at_max_bytes_and_the_memory_with_an_error() {
    // dedup's scalable chain doubles from 1000 items; --max-bytes holds it (its growth ran
    // on past it, to every line's worth). The lines before the refused one are printed.
    let dir = TempDir::new().unwrap();
    let lines = dir.path().join("lines");
    fs::write(
        &lines,
        (1..=100_000).map(|i| format!("{i}\n")).collect::<String>(),
    )
    .unwrap();
    let output = bloomery()
        .args([
            "dedup",
            "--variant",
            "scalable",
            "--items",
            "1000",
            "--max-bytes",
            "100000",
            "-i",
        ])
        .arg(&lines)
        .output()
        .expect("runs");
    assert_clean_end(&output, "dedup");
    assert_eq!(output.status.code(), Some(2));
    let message = String::from_utf8_lossy(&output.stderr);
    assert!(
        message.contains("filter cannot grow") && message.contains("100000 bytes"),
        "{message}"
    );
    let printed = output.stdout.iter().filter(|&&byte| byte == b'\n').count();
    assert!((20_000..40_000).contains(&printed), "{printed} lines");

    // `add` to a 192-byte file whose parameters make its next sub-filter 182 GB (a scalable
    // blocked filter, initial capacity patched to 5·10^10, its full first link kept): the
    // growth is refused before allocating, the file left as it was. It aborted the process.
    use bloomery::format::native::{self, Persist, Variant};
    use bloomery::scalable_blocked::ScalableBlockedBloomFilter;
    let small =
        ScalableBlockedBloomFilter::new(10, 0.01, bloomery::ScalableOptions::for_blocked(), 0).unwrap();
    let mut params = Persist::params(&small);
    params[0..8].copy_from_slice(&50_000_000_000u64.to_le_bytes());
    params[41..49].copy_from_slice(&1u64.to_le_bytes());
    params[49..57].copy_from_slice(&1u64.to_le_bytes());
    let bytes = native::encode(Variant::ScalableBlocked, &params, &Persist::payload(&small));
    let path = dir.path().join("grows.bloom");
    fs::write(&path, &bytes).unwrap();
    let message = error_of(bloomery().arg("add").arg(&path).arg("a new item"));
    assert!(
        message.contains("cannot") && message.contains("nothing was saved"),
        "{message}"
    );
    assert_eq!(fs::read(&path).unwrap(), bytes);
}

/// Runs the command with its standard output closed (`>&-`).
trait CloseStdout {
    fn pre_exec_close_stdout(&mut self) -> &mut Self;
}

impl CloseStdout for Command {
    fn pre_exec_close_stdout(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: close(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            self.pre_exec(|| {
                libc::close(1);
                Ok(())
            })
        }
    }
}

fn with_stdout(args: &[&std::ffi::OsStr], stdout: Stdio) -> Output {
    bloomery()
        .args(args)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .output()
        .expect("runs")
}

#[test]
fn a_full_or_closed_stdout_is_an_error_line_or_a_quiet_end_never_a_panic() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "--items", "1000"])
        .arg(&path));
    add(&path, &["a", "b"]);
    let input = dir.path().join("lines");
    fs::write(
        &input,
        (0..100_000).map(|i| format!("line {i}\n")).collect::<String>(),
    )
    .expect("writes");
    let p = path.as_os_str();
    let runs: Vec<Vec<&std::ffi::OsStr>> = vec![
        vec!["info".as_ref(), p],
        vec!["verify".as_ref(), p],
        vec!["check".as_ref(), p, "a".as_ref(), "zz".as_ref()],
        vec!["check".as_ref(), p, "-i".as_ref(), input.as_os_str()],
        vec!["dedup".as_ref(), "-i".as_ref(), input.as_os_str()],
        vec!["export".as_ref(), p, "-".as_ref()],
        // Help and version too (clap's own exit dropped the error, with status 0).
        vec!["--help".as_ref()],
        vec!["create".as_ref(), "--help".as_ref()],
        vec!["help".as_ref(), "add".as_ref()],
        vec!["--version".as_ref()],
    ];
    for args in &runs {
        let full = with_stdout(args, Stdio::from(fs::File::create("/dev/full").expect("opens")));
        assert_clean_end(&full, &format!("{args:?} > /dev/full"));
        assert_eq!(full.status.code(), Some(2), "{args:?} > /dev/full");
        assert!(
            String::from_utf8_lossy(&full.stderr).contains("No space left"),
            "{args:?}"
        );
        // Standard output closed (`>&-`): the Rust runtime reopens it on /dev/null before
        // main, so the run is as with `> /dev/null`.
        let closed = bloomery()
            .args(args)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .pre_exec_close_stdout()
            .output()
            .expect("runs");
        assert_clean_end(&closed, &format!("{args:?} >&-"));
        // A pipe whose reader has gone.
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let closed = with_stdout(args, Stdio::from(writer));
        assert_clean_end(&closed, &format!("{args:?} | (closed)"));
    }
}

#[test]
fn a_full_or_closed_stderr_loses_warnings_not_the_run() {
    // A warning (standard input holds data that is not read; BLOOMERY_TIMINGS's phases)
    // went through eprintln!, which panics when standard error is full or closed: the run
    // ended with status 101 before adding anything.
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    ok(bloomery().args(["create", "--items", "1000"]).arg(&path));
    let unread = dir.path().join("unread");
    fs::write(&unread, "1\n2\n3\n").expect("writes");
    type MakeStderr = fn() -> Stdio;
    let stderrs: [(&str, MakeStderr); 2] = [
        ("2> /dev/full", || {
            Stdio::from(fs::File::options().write(true).open("/dev/full").expect("opens"))
        }),
        ("2> (a pipe whose reader left)", || {
            let (reader, writer) = std::io::pipe().expect("pipe");
            drop(reader);
            Stdio::from(writer)
        }),
    ];
    for (what, stderr) in stderrs {
        for (item, timings) in [("apple", false), ("pear", true)] {
            let mut command = bloomery();
            command
                .arg("add")
                .arg(&path)
                .arg(item)
                .stdin(fs::File::open(&unread).expect("opens"))
                .stdout(Stdio::null())
                .stderr(stderr());
            if timings {
                command.env("BLOOMERY_TIMINGS", "1");
            }
            let status = command.status().expect("runs");
            assert_eq!(status.code(), Some(0), "add {item} {what}");
        }
        let mut command = bloomery();
        command
            .arg("check")
            .arg(&path)
            .args(["apple", "pear"])
            .stdin(fs::File::open(&unread).expect("opens"))
            .stdout(Stdio::null())
            .stderr(stderr());
        assert_eq!(command.status().expect("runs").code(), Some(0), "check {what}");
    }
}

#[test]
fn check_whose_reader_left_still_answers_for_every_item_by_its_status() {
    // `check f -i items | head -1` under `set -o pipefail`: the status covers the items
    // looked up after the reader left, not only the printed ones.
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    ok(bloomery()
        .args(["create", "--variant", "blocked", "--items", "100000"])
        .arg(&path));
    let present: String = (0..50_000).map(|i| format!("item {i}\n")).collect();
    let all = dir.path().join("all");
    fs::write(&all, &present).expect("writes");
    ok(bloomery().arg("add").arg(&path).arg("-i").arg(&all));
    let last_absent = dir.path().join("last-absent");
    fs::write(&last_absent, format!("{present}not added\n")).expect("writes");
    for (input, status) in [(&all, 0), (&last_absent, 1)] {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader);
        let run = with_stdout(
            &[
                "check".as_ref(),
                path.as_os_str(),
                "-i".as_ref(),
                input.as_os_str(),
            ],
            Stdio::from(writer),
        );
        assert_clean_end(&run, &format!("check -i {} | (closed)", input.display()));
        assert_eq!(run.status.code(), Some(status), "{}", input.display());
    }
}

#[test]
fn readers_loading_a_file_that_an_add_updates_in_place_never_call_it_damaged() {
    // `export` and `merge` load their inputs whole. A file updated in place changes under
    // such a read: its payload checksum fails against the header read first. That is a
    // writer at work (the header changed, or its lock is held), not damage, and the bits
    // read are valid; before, the exports and merges here failed with "damaged".
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "--items", "30000000"])
        .arg(&path));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (path, stop) = (path.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut adds = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                add(&path, &[&format!("item {adds}")]);
                adds += 1;
            }
            adds
        })
    };
    let (mut notes, mut runs) = (0, 0);
    let started = Instant::now();
    while runs < 12 || (notes == 0 && started.elapsed() < Duration::from_secs(60)) {
        runs += 1;
        for output in [
            bloomery()
                .args(["export", "--force"])
                .arg(&path)
                .arg(dir.path().join("out.guava"))
                .output(),
            bloomery()
                .args(["merge", "--force"])
                .arg(dir.path().join("merged.bloom"))
                .arg(&path)
                .output(),
        ] {
            let output = output.expect("runs");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(output.status.success(), "{stderr}");
            assert!(!stderr.contains("damaged"), "{stderr}");
            if stderr.contains("being updated in place") {
                notes += 1;
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let adds = writer.join().expect("writer");
    assert!(notes > 0, "no read met a writer at work in {runs} rounds");
    let items: Vec<String> = (0..adds).map(|i| format!("item {i}")).collect();
    assert!(all_present(&path, &items));
}

#[test]
fn dedup_keeps_no_line_it_could_not_print() {
    // A line `dedup --filter` keeps is one it printed: the next run drops it as seen. With
    // standard output on a full device, no line is printed, so none is kept, whatever the
    // variant: those updated in place kept the batch they had added before it failed to
    // print (4,096 lines), those written whole are not saved.
    let dir = open_dir();
    let input = dir.path().join("lines");
    fs::write(
        &input,
        (0..20_000).map(|i| format!("line {i}\n")).collect::<String>(),
    )
    .expect("writes");
    for variant in ["blocked", "classic", "split-block", "counting"] {
        let path = dir.path().join(format!("{variant}.bloom"));
        ok(bloomery()
            .args(["create", "--variant", variant, "--items", "100000"])
            .arg(&path));
        let args = [
            "dedup".as_ref(),
            "--filter".as_ref(),
            path.as_os_str(),
            "-i".as_ref(),
            input.as_os_str(),
        ];
        let full = with_stdout(&args, Stdio::from(fs::File::create("/dev/full").expect("opens")));
        assert_eq!(full.status.code(), Some(2), "{variant}");
        let count = bloomery()
            .args(["check", "--count", "-i"])
            .arg(&input)
            .arg(&path)
            .output()
            .expect("runs");
        let counted = String::from_utf8_lossy(&count.stdout);
        assert!(counted.starts_with("0 probably present"), "{variant}: {counted}");
        verify(&path);
        // Printed, they are kept: a second run to a file prints none of them again. (A
        // few of the 20,000 may be false positives of the lines before them.)
        let printed = ok(bloomery()
            .args(["dedup", "--filter"])
            .arg(&path)
            .arg("-i")
            .arg(&input));
        let lines = printed.stdout.iter().filter(|&&byte| byte == b'\n').count();
        assert!((19_900..=20_000).contains(&lines), "{variant}: {lines}");
        let again = ok(bloomery()
            .args(["dedup", "--filter"])
            .arg(&path)
            .arg("-i")
            .arg(&input));
        assert!(again.stdout.is_empty(), "{variant}");
    }
}

/// `dedup --filter` counts a line as printed once standard output accepted it: its reader,
/// a pipe that exits after reading one line, loses the lines the pipe's buffer held (the
/// filter keeps them), and no more: the lines the filter holds past the one read fit in the
/// pipe's buffer. (The docs once said at most one batch of 4,096 lines.)
#[test]
fn dedup_into_a_reader_that_leaves_loses_at_most_what_its_pipe_held() {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    let dir = open_dir();
    let path = dir.path().join("d.bloom");
    create(&path, 100_000);
    let lines: Vec<String> = (1..=50_000).map(|i| i.to_string()).collect();
    let input = dir.path().join("lines");
    fs::write(
        &input,
        lines.iter().map(|line| format!("{line}\n")).collect::<String>(),
    )
    .expect("writes");
    let mut child = bloomery()
        .args(["dedup", "--filter"])
        .arg(&path)
        .arg("-i")
        .arg(&input)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut stdout = child.stdout.take().expect("piped");
    // SAFETY: F_GETPIPE_SZ reads the size of the pipe `stdout` holds open.
    let capacity = unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_GETPIPE_SZ) };
    assert!(capacity > 0, "F_GETPIPE_SZ: {}", std::io::Error::last_os_error());
    // Time for dedup to fill the pipe and wait on it (the bound holds either way).
    std::thread::sleep(Duration::from_millis(500));
    // One line read, a byte at a time (nothing read ahead), then the reader leaves.
    let mut first = Vec::new();
    loop {
        let mut byte = [0u8];
        stdout.read_exact(&mut byte).expect("reads");
        if byte[0] == b'\n' {
            break;
        }
        first.push(byte[0]);
    }
    drop(stdout);
    let output = child.wait_with_output().expect("waits");
    assert_clean_end(&output, "dedup");
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(first, b"1");
    // The filter holds a prefix of the lines (printed, then added, in order): up to the
    // first one `check` says absent.
    let answers = bloomery()
        .arg("check")
        .arg(&path)
        .arg("-i")
        .arg(&input)
        .output()
        .expect("runs");
    let answers = String::from_utf8_lossy(&answers.stdout);
    let kept = answers
        .lines()
        .take_while(|answer| answer.starts_with("probably present"))
        .count();
    assert!(kept >= 1, "the line read is kept");
    // Of the kept lines, those not read, with their line ends (one line of slack for a
    // false positive right after the prefix).
    let unread: usize = lines[1..kept.saturating_sub(1).max(1)]
        .iter()
        .map(|line| line.len() + 1)
        .sum();
    assert!(
        unread <= capacity as usize,
        "{kept} lines kept, {unread} bytes of them unread: more than the pipe's {capacity}"
    );
}

#[test]
fn two_dedups_into_one_new_file_take_turns() {
    // Two `dedup --filter NEW` runs at once: the file is made before the first line is
    // read and locked like an existing one, so they take turns. Before, each built its
    // filter in memory and the slower one failed at the end ("created by another program
    // meanwhile") after printing lines its filter then did not keep.
    let dir = open_dir();
    for variant in ["blocked", "counting"] {
        let path = dir.path().join(format!("{variant}.bloom"));
        // The second starts once the file exists, so without sizing options (refused
        // for an existing file).
        let dedup = |sizing: &[&str]| {
            bloomery()
                .arg("dedup")
                .args(sizing)
                .arg("--filter")
                .arg(&path)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("runs")
        };
        let mut first = dedup(&["--variant", variant, "--items", "1000"]);
        let mut first_in = first.stdin.take().expect("piped");
        first_in.write_all(b"1\n2\n3\n4\n5\n").expect("writes");
        first_in.flush().expect("flushes");
        let started = Instant::now();
        while !path.exists() && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut second = dedup(&[]);
        second
            .stdin
            .take()
            .expect("piped")
            .write_all(b"3\n4\n5\n6\n7\n8\n")
            .expect("writes");
        std::thread::sleep(Duration::from_millis(200));
        first_in.write_all(b"6\n7\n8\n9\n10\n").expect("writes");
        drop(first_in);
        let (first, second) = (
            first.wait_with_output().expect("runs"),
            second.wait_with_output().expect("runs"),
        );
        let mut printed = Vec::new();
        for run in [&first, &second] {
            assert!(
                run.status.success(),
                "{variant}: {}",
                String::from_utf8_lossy(&run.stderr)
            );
            printed.extend(String::from_utf8_lossy(&run.stdout).lines().map(str::to_owned));
        }
        printed.sort_by_key(|line| line.parse::<u32>().expect("a number"));
        let expected: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
        assert_eq!(
            printed, expected,
            "{variant}: each line printed once across both runs"
        );
        assert!(all_present(&path, &expected), "{variant}");
        verify(&path);
    }
}

#[test]
fn nothing_to_check_or_add_is_an_error_not_success() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 100);
    let message = error_of(bloomery().args(["check", "-q"]).arg(&path).stdin(Stdio::null()));
    assert!(message.contains("no items given"), "{message}");
    let message = error_of(bloomery().arg("add").arg(&path).stdin(Stdio::null()));
    assert!(message.contains("no items given"), "{message}");
}

/// A full filter's refusal ends the run at once while its input, a pipe, stays open with
/// nothing more for now: the error line, status 2, and the file's lock let go of. The
/// error once waited for the input's next line (the reading thread, blocked in `read`,
/// was joined first), the lock held all the while: `(printf 'a\nb\n'; sleep 8; echo c) |
/// bloomery dedup --filter full.bloom` said it after 8 s.
#[test]
fn a_refused_item_ends_the_run_while_the_input_stays_open() {
    let dir = open_dir();
    let path = dir.path().join("full.bloom");
    ok(bloomery()
        .args(["create", "-n", "2", "--variant", "scalable", "--nonscaling"])
        .arg(&path));
    add(&path, &["x", "y"]);
    let full = path.as_os_str();
    let runs: [&[&std::ffi::OsStr]; 3] = [
        &["dedup".as_ref(), "--filter".as_ref(), full],
        &["add".as_ref(), full],
        // In memory: the second line is past the first sub-filter's one item.
        &[
            "dedup".as_ref(),
            "-n".as_ref(),
            "1".as_ref(),
            "--variant".as_ref(),
            "scalable".as_ref(),
            "--nonscaling".as_ref(),
        ],
    ];
    for args in runs {
        // Two lines, then the pipe held open by a process that writes nothing more.
        let mut producer = Command::new("sh")
            .args(["-c", "printf 'a\\nb\\n'; exec sleep 60"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("runs sh");
        let input = producer.stdout.take().expect("piped");
        let started = Instant::now();
        let mut child = bloomery()
            .args(args)
            .stdin(input)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs");
        let status = loop {
            if let Some(status) = child.try_wait().expect("waits") {
                break Some(status);
            }
            if started.elapsed() > Duration::from_secs(5) {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let input_open = producer.try_wait().expect("waits").is_none();
        let _ = producer.kill();
        let _ = producer.wait();
        let output = match status {
            Some(_) => child.wait_with_output().expect("waits"),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{args:?}: still running after 5 s, its input open and waiting");
            }
        };
        assert!(input_open, "{args:?}: the input was closed first");
        assert_clean_end(&output, &format!("{args:?}"));
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("filter is full"), "{args:?}: {stderr}");
    }
    // The file holds what it held (the refused runs saved nothing).
    assert!(all_present(&path, &["x".into(), "y".into()]));
    verify(&path);
}

#[test]
fn dedup_refuses_sizing_options_for_an_existing_filter() {
    let dir = open_dir();
    let path = dir.path().join("seen.bloom");
    create(&path, 100);
    let message = error_of(
        bloomery()
            .args(["dedup", "--items", "5000", "--variant", "classic", "--filter"])
            .arg(&path)
            .stdin(Stdio::null()),
    );
    assert!(
        message.contains("--items, --variant would be ignored"),
        "{message}"
    );
    // So is `--max-bytes`, as its help says: it caps the growth of a filter dedup makes.
    let message = error_of(
        bloomery()
            .args(["dedup", "--max-bytes", "100000", "--filter"])
            .arg(&path)
            .stdin(Stdio::null()),
    );
    assert!(message.contains("--max-bytes would be ignored"), "{message}");
}

#[test]
fn dedup_prints_lines_as_read_and_items_are_bytes_not_text() {
    let mut child = bloomery()
        .arg("dedup")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("runs");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(b"a\r\nb\na\n\xff\xfe\r\n\xff\xfe\n")
        .expect("writes");
    let output = child.wait_with_output().expect("waits");
    // "a\r\n" and "a\n" are one item (the '\r' is not part of it) but the first is printed
    // as it came.
    assert_eq!(output.stdout, b"a\r\nb\n\xff\xfe\r\n");
    // Arguments that are not UTF-8 are items too.
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 100);
    use std::os::unix::ffi::OsStrExt;
    let item = std::ffi::OsStr::from_bytes(b"\xff\xfe");
    ok(bloomery().arg("add").arg(&path).arg(item));
    ok(bloomery().arg("check").arg(&path).arg(item));
}

#[test]
fn writers_leave_no_lock_files_and_a_missing_file_leaves_nothing() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 100);
    add(&path, &["x"]);
    let message = error_of(
        bloomery()
            .arg("add")
            .arg(dir.path().join("nothere.bloom"))
            .arg("x"),
    );
    assert!(message.contains("No such file"), "{message}");
    assert_eq!(leftovers(dir.path(), &["f.bloom"]), Vec::<String>::new());
}

#[test]
fn an_overfilled_filter_says_so() {
    let dir = open_dir();
    for variant in ["blocked", "classic", "counting"] {
        let path = dir.path().join(format!("{variant}.bloom"));
        ok(bloomery()
            .args(["create", "--variant", variant, "--items", "100"])
            .arg(&path));
        // Filled to its capacity: no warning.
        let items: Vec<String> = (0..100).map(|i| format!("item {i}")).collect();
        let output = ok(bloomery().arg("add").arg(&path).args(&items));
        assert!(
            output.stderr.is_empty(),
            "{variant}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // Past it: a warning, and the items are added all the same.
        let items: Vec<String> = (1000..1500).map(|i| format!("item {i}")).collect();
        let output = ok(bloomery().arg("add").arg(&path).args(&items));
        let warning = String::from_utf8_lossy(&output.stderr);
        assert!(
            warning.contains("warning") && warning.contains("more than the"),
            "{variant}: {warning}"
        );
        assert!(all_present(&path, &items), "{variant}");
    }
    let path = dir.path().join("f.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "--items", "10"])
        .arg(&path));
    let items: Vec<String> = (0..5000).map(|i| format!("more {i}")).collect();
    ok(bloomery().arg("add").arg(&path).args(&items));
    let info = String::from_utf8(ok(bloomery().arg("info").arg(&path)).stdout).expect("UTF-8");
    assert!(
        info.contains("estimated items: unknown: every bit is set"),
        "{info}"
    );
    assert!(!info.contains("18446744073709551615"), "{info}");
    // A rotating filter starts a generation when one is full: never overfull, however
    // many items its generations hold together.
    let path = dir.path().join("rotating.bloom");
    ok(bloomery()
        .args([
            "create",
            "--variant",
            "rotating",
            "--items",
            "20",
            "--generations",
            "4",
        ])
        .arg(&path));
    let items: Vec<String> = (0..78).map(|i| format!("item {i}")).collect();
    let output = ok(bloomery().arg("add").arg(&path).args(&items));
    assert_quiet(&output);
}

#[test]
fn check_finds_bit_rot_that_the_mapped_read_would_miss() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    ok(bloomery()
        .args(["create", "--variant", "classic", "--items", "1000"])
        .arg(&path));
    add(&path, &["apple"]);
    // Clear every payload byte of the last 64: the file now answers "absent" wrongly for
    // items there, and only the payload checksum can tell.
    let mut bytes = fs::read(&path).expect("reads");
    let len = bytes.len();
    for byte in &mut bytes[len - 64..] {
        *byte = 0;
    }
    for byte in &mut bytes[len - 1200..len - 64] {
        *byte = 0;
    }
    fs::write(&path, &bytes).expect("writes");
    let message = error_of(bloomery().arg("check").arg(&path).arg("apple"));
    assert!(message.contains("checksum"), "{message}");
    let info = String::from_utf8(ok(bloomery().arg("info").arg(&path)).stdout).expect("UTF-8");
    assert!(info.contains("payload checksum: DAMAGED"), "{info}");
    // The fast path answers from the bits, as documented.
    let output = bloomery()
        .args(["check", "--no-verify"])
        .arg(&path)
        .arg("apple")
        .output()
        .expect("runs");
    assert_clean_end(&output, "check --no-verify");
    // The other variants are built in memory from the file, which checks the checksum:
    // `info` and `check --no-verify` of a damaged one are errors (as their help says).
    let scalable = dir.path().join("s.bloom");
    ok(bloomery()
        .args(["create", "--variant", "scalable", "--items", "1000"])
        .arg(&scalable));
    add(&scalable, &["apple"]);
    let mut bytes = fs::read(&scalable).expect("reads");
    let len = bytes.len();
    bytes[len - 3] ^= 0xff;
    fs::write(&scalable, &bytes).expect("writes");
    let (info, check) = (
        ["info".as_ref(), scalable.as_os_str()],
        [
            "check".as_ref(),
            "--no-verify".as_ref(),
            scalable.as_os_str(),
            "apple".as_ref(),
        ],
    );
    for args in [&info[..], &check[..]] {
        let message = error_of(bloomery().args(args));
        assert!(
            message.contains("payload checksum mismatch"),
            "{args:?}: {message}"
        );
    }
}

#[test]
fn a_file_truncated_while_mapped_is_an_error_line_not_a_crash() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 1_000_000);
    let mut child = bloomery()
        .args(["check", "--no-verify"])
        .arg(&path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let mut stdin = child.stdin.take().expect("piped");
    // The file is mapped before the first item is read; give it time to start.
    std::thread::sleep(Duration::from_millis(500));
    // Truncate in place, as another program might.
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("opens")
        .set_len(4096)
        .expect("truncates");
    for i in 0..1000 {
        if writeln!(stdin, "item {i}").is_err() {
            break;
        }
    }
    drop(stdin);
    let output = child.wait_with_output().expect("waits");
    assert_clean_end(&output, "check on a truncated file");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("changed size"));
}

/// Leaves `path` (a classic, blocked or split-block file) unsealed, as a writer killed
/// part way leaves it: an `add` whose first item went in (the file then says unsealed)
/// while it waits for more, killed.
fn unseal_by_a_killed_add(path: &Path) {
    let mut child = bloomery()
        .arg("add")
        .arg(path)
        .stdin(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("runs");
    let mut stdin = child.stdin.take().expect("piped");
    writeln!(stdin, "killed-add").expect("writes");
    stdin.flush().expect("flushes");
    let started = Instant::now();
    while bloomery()
        .arg("verify")
        .arg(path)
        .output()
        .expect("runs")
        .status
        .code()
        != Some(3)
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the add never unsealed the file"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("kills");
    child.wait().expect("waits");
}

/// `intersect --force u u o` reads its output `u`, one of its inputs, under its own lock:
/// unsealed, `u` is so from a writer that did not finish, and the note says that. It once
/// said `being updated in place by another writer`: the writer holding the lock was the
/// run itself.
#[test]
fn an_output_among_the_inputs_is_read_under_the_runs_own_lock() {
    let dir = open_dir();
    let (output, other) = (dir.path().join("u.bloom"), dir.path().join("o.bloom"));
    create(&output, 1000);
    create(&other, 1000);
    add(&output, &["a", "b"]);
    add(&other, &["a", "c"]);
    unseal_by_a_killed_add(&output);
    let intersected = ok(bloomery()
        .args(["intersect", "--force"])
        .arg(&output)
        .arg(&output)
        .arg(&other));
    let note = String::from_utf8_lossy(&intersected.stderr);
    assert!(
        note.contains("unsealed (an update in place did not finish") && !note.contains("another writer"),
        "{note}"
    );
    assert_clean_end(&intersected, "intersect");
    verify(&output);
    assert!(all_present(&output, &["a".into()]));
}

#[test]
fn merge_waits_for_a_running_add_to_its_output_and_keeps_its_items() {
    let dir = open_dir();
    let a = dir.path().join("a.bloom");
    let b = dir.path().join("b.bloom");
    create(&a, 1000);
    create(&b, 1000);
    add(&b, &["from-b"]);
    // An add that holds a's lock while it waits for its items on stdin.
    let mut adder = bloomery()
        .arg("add")
        .arg(&a)
        .stdin(Stdio::piped())
        .spawn()
        .expect("runs");
    std::thread::sleep(Duration::from_millis(300));
    let merger = bloomery()
        .args(["merge", "--force"])
        .arg(&a)
        .arg(&a)
        .arg(&b)
        .spawn()
        .expect("runs");
    std::thread::sleep(Duration::from_millis(300));
    let mut stdin = adder.stdin.take().expect("piped");
    writeln!(stdin, "added-meanwhile").expect("writes");
    drop(stdin);
    assert!(adder.wait().expect("waits").success());
    assert!(wait(merger).success());
    assert!(all_present(&a, &["added-meanwhile".into(), "from-b".into()]));
}

fn wait(mut child: Child) -> ExitStatus {
    child.wait().expect("waits")
}

/// A small xorshift generator, so the kill points are reproducible from the printed seed.
struct Random(u64);

impl Random {
    fn below(&mut self, bound: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % bound
    }
}

/// `kill -9` at random points of `add`, `merge` and `dedup --filter`, through a symlink to
/// a file with its own mode and owner: after each, `verify` finds the file sealed and valid
/// or unsealed (a run in place was killed: status 3), never damaged; it holds every item of
/// every finished add; mode, owner and link are as they were.
#[test]
fn kill_9_at_random_points_never_loses_acknowledged_items_or_damages_the_file() {
    let dir = open_dir();
    let real = dir.path().join("real.bloom");
    create(&real, 200_000);
    fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).expect("chmod");
    if is_root() {
        std::os::unix::fs::chown(&real, Some(NOBODY), Some(NOBODY)).expect("chown");
    }
    let mode_owner = |path: &Path| {
        let metadata = fs::metadata(path).expect("exists");
        (metadata.mode() & 0o7777, metadata.uid(), metadata.gid())
    };
    let expected = mode_owner(&real);
    let link = dir.path().join("link.bloom");
    symlink("real.bloom", &link).expect("symlink");
    let other = dir.path().join("other.bloom");
    create(&other, 200_000);
    add(&other, &["from-other"]);
    let mut acknowledged: Vec<String> = vec!["from-other".into()];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |elapsed| elapsed.as_nanos() as u64)
        | 1;
    eprintln!("kill points seed {seed}");
    let mut random = Random(seed);
    let mut kills = 0;
    let mut finished = 0;
    let mut round = 0u64;
    let mut typical_us = 20_000u64;
    ok(bloomery()
        .args(["merge", "--force"])
        .arg(&link)
        .arg(&link)
        .arg(&other));
    while kills < 210 {
        round += 1;
        let batch: Vec<String> = (0..3000).map(|i| format!("round {round} item {i}")).collect();
        let mut command = bloomery();
        match round % 3 {
            0 => command.arg("add").arg(&link).arg("-i").arg("-"),
            1 => command.args(["dedup", "--filter"]).arg(&link),
            _ => command
                .args(["merge", "--force"])
                .arg(&link)
                .arg(&link)
                .arg(&other),
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs");
        let mut stdin = child.stdin.take().expect("piped");
        let text: String = batch.iter().map(|item| format!("{item}\n")).collect();
        let writer = std::thread::spawn(move || {
            let _ = stdin.write_all(text.as_bytes());
        });
        // A kill point anywhere in a typical run (from its start to its end, as measured on
        // the runs that finished).
        let started = Instant::now();
        std::thread::sleep(Duration::from_micros(
            random.below((typical_us * 3 / 2).max(1000)),
        ));
        let killed = child.kill().is_ok();
        let output = child.wait_with_output().expect("waits");
        let _ = writer.join();
        if output.status.code() == Some(0) {
            let elapsed = started.elapsed().as_micros() as u64;
            typical_us = (typical_us * 3 + elapsed) / 4;
            finished += 1;
            if round % 3 != 2 {
                acknowledged.extend(batch);
            }
        } else {
            assert!(killed, "{}", String::from_utf8_lossy(&output.stderr));
            assert_eq!(output.status.code(), None, "killed by the signal");
            kills += 1;
            // The add, dedup or merge (into one of its inputs) changes the file in place:
            // it may hold part of the killed run's items, and be unsealed.
        }
        verify_sealed_or_unsealed(&link);
        assert!(
            fs::symlink_metadata(&link)
                .expect("exists")
                .file_type()
                .is_symlink()
        );
        assert_eq!(mode_owner(&real), expected);
        if round.is_multiple_of(10) {
            assert!(all_present(&link, &acknowledged), "round {round}");
            eprintln!("round {round}: {kills} kills, {finished} finished, typical run {typical_us} µs");
        }
    }
    assert!(all_present(&link, &acknowledged));
    // The next finished writer removes temporary files that killed writers left, and
    // seals the file.
    add(&link, &["last"]);
    verify(&link);
    assert_eq!(
        leftovers(dir.path(), &["real.bloom", "link.bloom", "other.bloom"]),
        Vec::<String>::new()
    );
    eprintln!(
        "{kills} kills, {finished} finished runs, {} acknowledged items",
        acknowledged.len()
    );
    assert!(finished > 0, "some runs should finish: raise the kill delay");
}

/// `kill -9` during in-place adds (issue 14), 60 times, on blocked, classic and split-block
/// files: items arrive slowly, so most kills land while the file is unsealed. After every
/// kill, `verify` says sealed-and-valid or unsealed (never a damaged header or payload), and
/// every item of every finished add is present; the next writer (an add, or `seal`) seals
/// the file again.
#[test]
fn kill_9_during_in_place_adds_keeps_every_finished_add_and_the_next_writer_reseals() {
    kill_9_during_adds(&KillRun {
        variants: &["blocked", "classic", "split-block"],
        capacity: "2000000",
        window: None,
        pieces: 8,
        pause: Duration::from_millis(4),
        latest_kill: Some(Duration::from_millis(60)),
        kills: 60,
        unsealed_kills: 10,
    });
}

/// The same for adds into files larger than the resident window (made small here with
/// `BLOOMERY_WINDOW_BYTES`), the road of a 12 GB filter: the hashes wait in spill files
/// until the input ends, and then one pass over the payload, a region at a time, sets the
/// bits (the file unsealed only during that pass). Kills land before, during and after it.
#[test]
fn kill_9_during_spilled_adds_into_large_files_keeps_every_finished_add() {
    kill_9_during_adds(&KillRun {
        variants: &["blocked", "split-block"],
        capacity: "50000000",
        window: Some("16777216"),
        pieces: 1,
        pause: Duration::ZERO,
        latest_kill: None,
        kills: 30,
        unsealed_kills: 5,
    });
}

/// How long one add of 40,000 items takes here, as `run` makes them (the longest of
/// three, into a scratch file).
fn whole_add_time(dir: &TempDir, run: &KillRun) -> Duration {
    let path = dir.path().join("timing.bloom");
    ok(bloomery()
        .args(["create", "--variant", run.variants[0], "--items", run.capacity])
        .arg(&path));
    let items: String = (0..40_000).map(|i| format!("timing item {i}\n")).collect();
    let longest = (0..3)
        .map(|_| {
            let mut child = run
                .add_command()
                .arg("add")
                .arg(&path)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .spawn()
                .expect("runs");
            let start = std::time::Instant::now();
            child
                .stdin
                .take()
                .expect("piped")
                .write_all(items.as_bytes())
                .expect("writes");
            assert!(child.wait().expect("waits").success());
            start.elapsed()
        })
        .max()
        .expect("three runs");
    fs::remove_file(&path).expect("removes");
    eprintln!("an add takes up to {longest:?} here");
    longest
}

/// How [`kill_9_during_adds`] runs.
struct KillRun {
    variants: &'static [&'static str],
    /// Items each file is created for.
    capacity: &'static str,
    /// `BLOOMERY_WINDOW_BYTES` for the adds, if set.
    window: Option<&'static str>,
    /// Each add's 40,000 items arrive in this many pieces, with `pause` after each.
    pieces: usize,
    pause: Duration,
    /// A killed add is killed at a random time below this; if `None`, below the time a
    /// whole add takes here (timed once first: the spilled add's pass comes at its end).
    latest_kill: Option<Duration>,
    /// Kills to make, and how many of them at least must leave a file unsealed.
    kills: u32,
    unsealed_kills: u32,
}

impl KillRun {
    /// `bloomery`, with the run's window for its adds.
    fn add_command(&self) -> Command {
        let mut command = bloomery();
        if let Some(window) = self.window {
            command.env("BLOOMERY_WINDOW_BYTES", window);
        }
        command
    }
}

fn kill_9_during_adds(run: &KillRun) {
    let dir = open_dir();
    let variants = run.variants;
    let paths: Vec<_> = variants
        .iter()
        .map(|variant| {
            let path = dir.path().join(format!("{variant}.bloom"));
            ok(bloomery()
                .args([
                    "create",
                    "--variant",
                    variant,
                    "--items",
                    run.capacity,
                    "--fpp",
                    "0.01",
                ])
                .arg(&path));
            path
        })
        .collect();
    let mut acknowledged: Vec<Vec<String>> = vec![Vec::new(); variants.len()];
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |elapsed| elapsed.as_nanos() as u64)
        | 1;
    eprintln!("kill points seed {seed}");
    let mut random = Random(seed);
    let latest = run
        .latest_kill
        .unwrap_or_else(|| whole_add_time(&dir, run))
        .as_micros() as u64;
    let (mut kills, mut unsealed_kills, mut finished, mut round) = (0, 0, 0, 0u64);
    // Items in pieces, with pauses: the add's first batch (16,384 items) marks the file
    // unsealed, and the rest keeps it so for most of the run (when the items go in batch
    // by batch, not spilled).
    let pieces = run.pieces;
    let per_piece = 40_000 / pieces;
    let pause = run.pause;
    while kills < run.kills {
        round += 1;
        let which = ((round / 3) % variants.len() as u64) as usize;
        let path = &paths[which];
        let batch: Vec<String> = (0..pieces * per_piece)
            .map(|i| format!("round {round} item {i} https://example.com/{i}"))
            .collect();
        let mut child = run
            .add_command()
            .arg("add")
            .arg(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs");
        let mut stdin = child.stdin.take().expect("piped");
        let text: Vec<String> = batch
            .chunks(per_piece)
            .map(|piece| piece.iter().map(|item| format!("{item}\n")).collect())
            .collect();
        let writer = std::thread::spawn(move || {
            for piece in text {
                if stdin.write_all(piece.as_bytes()).is_err() {
                    return;
                }
                std::thread::sleep(pause);
            }
        });
        // One run in three finishes; the others are killed anywhere in their run.
        let kill = round % 3 != 0;
        if kill {
            std::thread::sleep(Duration::from_micros(random.below(latest)));
            let _ = child.kill();
        }
        let output = child.wait_with_output().expect("waits");
        let _ = writer.join();
        if output.status.code() == Some(0) {
            finished += 1;
            acknowledged[which].extend(batch);
            // A finished add leaves the file sealed, whoever left it unsealed before.
            assert!(
                !verify_sealed_or_unsealed(path),
                "round {round}: unsealed after a finished add"
            );
        } else {
            assert!(kill, "round {round}: {}", String::from_utf8_lossy(&output.stderr));
            assert_eq!(output.status.code(), None, "killed by the signal");
            kills += 1;
            if verify_sealed_or_unsealed(path) {
                unsealed_kills += 1;
                // An unsealed file answers from its bits, and says so.
                let check = bloomery()
                    .args(["check", "-q"])
                    .arg(path)
                    .arg("probe")
                    .output()
                    .expect("runs");
                assert!(String::from_utf8_lossy(&check.stderr).contains("unsealed"));
                // Half the time `seal` reseals it; else the next add does.
                if kills % 2 == 0 {
                    let sealed = ok(bloomery().arg("seal").arg(path));
                    assert!(
                        String::from_utf8_lossy(&sealed.stdout).contains("sealed (payload checksum written")
                    );
                    verify(path);
                }
            }
        }
        // Every item of the last finished adds after every run; of every finished add, in
        // every file, every 10 runs.
        let items = &acknowledged[which];
        let recent = &items[items.len().saturating_sub(3 * pieces * per_piece)..];
        assert!(
            recent.is_empty() || all_present(path, recent),
            "round {round}: {} lost items",
            path.display()
        );
        if round.is_multiple_of(10) {
            for (path, items) in paths.iter().zip(&acknowledged) {
                let lost = !items.is_empty() && !all_present(path, items);
                assert!(!lost, "round {round}: {} lost items", path.display());
            }
        }
    }
    for (path, items) in paths.iter().zip(&acknowledged) {
        assert!(all_present(path, items), "{} lost items", path.display());
        add(path, &["last"]);
        verify(path);
    }
    // No temporary or spill file of a killed add is left once the next add has run (a
    // spilled add's files are unnamed, or removed by the next writer: they were left).
    let names: Vec<String> = variants
        .iter()
        .map(|variant| format!("{variant}.bloom"))
        .collect();
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_eq!(leftovers(dir.path(), &names), Vec::<String>::new());
    eprintln!("{kills} kills ({unsealed_kills} left the file unsealed), {finished} finished adds");
    assert!(
        unsealed_kills >= run.unsealed_kills,
        "few kills landed in the update: {unsealed_kills}"
    );
}

/// `command` under a limit of `bytes` on the size of the files it writes (`ulimit -f`),
/// with SIGXFSZ at its default disposition, as a shell leaves it: a write past the limit
/// then kills a process that does not ignore the signal (status 153 from a shell).
fn with_file_size_limit(command: &mut Command, bytes: u64) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: signal(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_DFL);
            Ok(())
        });
    }
    with_limit(command, libc::RLIMIT_FSIZE, bytes)
}

/// A writer of a whole file under a limit on file size (`ulimit -f`) that its new file
/// passes: one error line and status 2, the temporary file removed, the old file as it
/// was. SIGXFSZ once killed the process (status 153 from a shell, no message) and left
/// the temporary file `.x.bloom.<pid>.<hex>.tmp` beside the target.
#[test]
fn a_write_past_the_limit_on_file_size_is_an_error_line_and_leaves_the_old_file() {
    let dir = open_dir();
    // A new file (`create`: "nothing was created").
    let new = dir.path().join("new.bloom");
    let message = error_of(with_file_size_limit(
        bloomery()
            .args(["create", "-n", "100000", "--variant", "scalable"])
            .arg(&new),
        10 << 10,
    ));
    assert!(message.contains("File too large"), "{message}");
    assert!(!new.exists());
    assert_eq!(leftovers(dir.path(), &[]), Vec::<String>::new());
    // An existing file replaced (`merge --force` into it, `add` by copy): "left unchanged".
    let path = dir.path().join("s.bloom");
    ok(bloomery()
        .args(["create", "-n", "100000", "--variant", "scalable"])
        .arg(&path));
    add(&path, &["before"]);
    let other = dir.path().join("t.bloom");
    ok(bloomery()
        .args(["create", "-n", "100000", "--variant", "counting"])
        .arg(&other));
    add(&other, &["other"]);
    let counting = dir.path().join("c.bloom");
    ok(bloomery()
        .args(["create", "-n", "100000", "--variant", "counting"])
        .arg(&counting));
    let before = [&path, &counting].map(|path| fs::read(path).expect("reads"));
    let runs: [Vec<&std::ffi::OsStr>; 3] = [
        vec!["add".as_ref(), path.as_ref(), "after".as_ref()],
        vec![
            "merge".as_ref(),
            "--force".as_ref(),
            counting.as_ref(),
            counting.as_ref(),
            other.as_ref(),
        ],
        vec!["add".as_ref(), counting.as_ref(), "after".as_ref()],
    ];
    for args in runs {
        let what = format!("{args:?}");
        let message = error_of(with_file_size_limit(bloomery().args(args), 10 << 10));
        assert!(message.contains("File too large"), "{what}: {message}");
        assert!(message.contains("left unchanged"), "{what}: {message}");
        assert_eq!(
            leftovers(dir.path(), &["s.bloom", "t.bloom", "c.bloom"]),
            Vec::<String>::new(),
            "{what}"
        );
    }
    assert_eq!(
        before,
        [&path, &counting].map(|path| fs::read(path).expect("reads"))
    );
    assert!(all_present(&path, &["before".into()]));
}

/// A spilled add (a file larger than the window, `BLOOMERY_WINDOW_BYTES`) whose spill files
/// cannot grow (here a limit on file size, SIGXFSZ at its default disposition; a full disk
/// takes the same road): the hashes spilled so far go in, in one pass, and the rest batch by
/// batch, as where the directory refuses spill files. Every item is added. Before, the add
/// failed at the first spill write refused ("File too large", or on a full disk "No space
/// left on device") with the items read so far added, although the file itself needed no
/// more room; earlier still, the pass stopped at the first spill file it could not flush,
/// after the error line had counted the items, and SIGXFSZ, not ignored, killed the run.
#[test]
fn a_spilled_add_that_cannot_write_its_spill_files_goes_on_batch_by_batch() {
    let dir = open_dir();
    let path = dir.path().join("big.bloom");
    create(&path, 1_000_000);
    let items: String = (1..=600_000).map(|i| format!("{i}\n")).collect();
    let input = dir.path().join("items.txt");
    fs::write(&input, &items).expect("writes");
    let mut command = bloomery();
    command
        .env("BLOOMERY_WINDOW_BYTES", "65536")
        .arg("add")
        .arg(&path)
        .arg("-i")
        .arg(&input);
    with_file_size_limit(&mut command, 64 << 10);
    let output = command.output().expect("runs");
    assert_clean_end(&output, "the add");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = bloomery()
        .args(["check", "--count", "-i"])
        .arg(&input)
        .arg(&path)
        .output()
        .expect("runs");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "600000 probably present, 0 absent"
    );
    verify(&path);
    assert_eq!(
        leftovers(dir.path(), &["big.bloom", "items.txt"]),
        Vec::<String>::new()
    );
}

/// Another program (which takes no lock) rewrites the file while an `add` updates it in
/// place: `cp other.bloom f.bloom` truncates and writes the same inode, before the add
/// marked it unsealed (it waits for its items), after (its first batch went in), on the
/// spilled road of files larger than the window, or puts another file at its name. The
/// add once wrote its own header over the other file's bits and sealed it: `verify` said
/// ok and every item of both filters was absent. Now it fails, saying so, and leaves the
/// file as the other program made it.
#[test]
fn a_file_another_program_rewrites_during_an_add_is_never_sealed_over() {
    let dir = open_dir();
    let other = dir.path().join("other.bloom");
    ok(bloomery()
        .args(["create", "--items", "1000000", "--seed", "7"])
        .arg(&other));
    let others: Vec<String> = (1..=1000).map(|i| format!("o{i}")).collect();
    ok(bloomery().arg("add").arg(&other).args(&others));
    let path = dir.path().join("f.bloom");
    // (window, items before the rewrite, whether the rewrite renames another file over it)
    for (window, first, rename) in [
        (None, 1, false),
        (None, 16_384, false),
        (None, 16_384, true),
        (Some("65536"), 16_384, false),
    ] {
        let what = format!("window {window:?}, {first} items first, rename {rename}");
        let _ = fs::remove_file(&path);
        create(&path, 1_000_000);
        let mut command = bloomery();
        if let Some(window) = window {
            command.env("BLOOMERY_WINDOW_BYTES", window);
        }
        let mut child = command
            .arg("add")
            .arg(&path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("runs");
        let mut stdin = child.stdin.take().expect("piped");
        let items: String = (0..first).map(|i| format!("item {i}\n")).collect();
        stdin.write_all(items.as_bytes()).expect("writes");
        stdin.flush().expect("flushes");
        if first == 16_384 && window.is_none() {
            // One whole batch: it goes in now, the file marked unsealed first.
            let started = Instant::now();
            let unsealed = || {
                bloomery()
                    .arg("verify")
                    .arg(&path)
                    .output()
                    .expect("runs")
                    .status
                    .code()
                    == Some(3)
            };
            while !unsealed() {
                assert!(
                    started.elapsed() < Duration::from_secs(20),
                    "{what}: never unsealed"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // The batch's bits set, the add waiting for more items.
        std::thread::sleep(Duration::from_millis(500));
        if rename {
            let copy = dir.path().join("copy.bloom");
            fs::copy(&other, &copy).expect("copies");
            fs::rename(&copy, &path).expect("renames");
        } else {
            // As `cp` does: the same file, truncated and written.
            fs::copy(&other, &path).expect("copies");
        }
        stdin.write_all(b"item last\n").expect("writes");
        drop(stdin);
        let output = child.wait_with_output().expect("waits");
        assert_clean_end(&output, &what);
        assert_eq!(output.status.code(), Some(2), "{what}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let said = if rename {
            "was replaced or removed by another program during this update"
        } else {
            "was changed by another program during this update"
        };
        assert!(stderr.contains(said), "{what}: {stderr}");
        assert_eq!(
            fs::read(&path).expect("reads"),
            fs::read(&other).expect("reads"),
            "{what}: the other program's file, as it wrote it"
        );
        verify(&path);
        assert!(all_present(&path, &others), "{what}");
    }
    assert_eq!(
        leftovers(dir.path(), &["other.bloom", "f.bloom"]),
        Vec::<String>::new()
    );
}

/// `command` with its address space limited to `bytes` (`ulimit -v`), where allocating past
/// it fails as it does on a machine out of memory.
fn with_address_space(command: &mut Command, bytes: u64) -> &mut Command {
    with_limit(command, libc::RLIMIT_AS, bytes)
}

/// `command` with its soft limit of `resource` (setrlimit(2)) set to `bytes`.
fn with_limit(command: &mut Command, resource: libc::__rlimit_resource_t, bytes: u64) -> &mut Command {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit(2) is async-signal-safe, as pre_exec requires.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: libc::RLIM_INFINITY,
            };
            if libc::setrlimit(resource, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command
}

/// A file of `lines` (each with its '\n'), then `zeros` zero bytes without a line end (a
/// hole: nothing written).
fn lines_then_zeros(path: &Path, lines: &[&str], zeros: u64) {
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    fs::write(path, &text).expect("writes");
    fs::OpenOptions::new()
        .write(true)
        .open(path)
        .expect("opens")
        .set_len(text.len() as u64 + zeros)
        .expect("extends");
}

/// Input without line ends: a line is held whole, so `check f < /dev/zero` grew one until
/// the allocation aborted the process ("memory allocation of 536870912 bytes failed",
/// status 134), and `import /dev/zero` read until it did. Now a line longer than 64 MiB is
/// an error, as a bad item is (the items before it added, as `add` says), and `import`
/// reads at most half the memory it may use.
#[test]
fn input_without_line_ends_is_an_error_not_an_abort() {
    const LIMIT: u64 = 400_000 << 10;
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 1000);
    let zero = || Stdio::from(fs::File::open("/dev/zero").expect("opens"));
    let message = error_of(
        with_address_space(&mut bloomery(), LIMIT)
            .arg("check")
            .arg(&path)
            .stdin(zero()),
    );
    assert!(
        message.contains("<stdin>: line 1 is longer than the 67108864-byte item limit"),
        "{message}"
    );
    // A line of exactly the limit is an item.
    let exact = dir.path().join("exact");
    lines_then_zeros(&exact, &[], 64 << 20);
    ok(bloomery().arg("add").arg(&path).arg("-i").arg(&exact));
    let long = dir.path().join("long");
    lines_then_zeros(&long, &["a", "b", "c"], (64 << 20) + 1);
    let message = error_of(bloomery().arg("add").arg(&path).arg("-i").arg(&long));
    assert!(
        message.contains("line 4 is longer than the 67108864-byte item limit")
            && message.ends_with("; the 3 items before it were added"),
        "{message}"
    );
    assert!(all_present(&path, &["a".into(), "b".into(), "c".into()]));
    verify(&path);
    let counting = dir.path().join("counting.bloom");
    ok(bloomery()
        .args(["create", "--variant", "counting", "--items", "1000"])
        .arg(&counting));
    let before = fs::read(&counting).expect("reads");
    let message = error_of(bloomery().arg("add").arg(&counting).arg("-i").arg(&long));
    assert!(
        message.contains("line 4 is longer") && message.ends_with("; nothing was saved"),
        "{message}"
    );
    assert_eq!(fs::read(&counting).expect("reads"), before);
    // `dedup` prints and keeps the lines before it.
    let seen = dir.path().join("seen.bloom");
    create(&seen, 1000);
    let output = bloomery()
        .args(["dedup", "--filter"])
        .arg(&seen)
        .arg("-i")
        .arg(&long)
        .output()
        .expect("runs");
    assert_clean_end(&output, "dedup of a long line");
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(output.stdout, b"a\nb\nc\n");
    assert!(all_present(&seen, &["a".into(), "b".into(), "c".into()]));
    // `import` reads whole: at most half the memory it may use.
    let imported = dir.path().join("imported.bloom");
    for input in ["/dev/zero", "-"] {
        let message = error_of(
            with_address_space(&mut bloomery(), LIMIT)
                .arg("import")
                .arg(input)
                .arg(&imported)
                .stdin(zero()),
        );
        assert!(
            message.contains("importing it takes twice that for a moment, more than the memory it may use")
                && message.ends_with("nothing was written"),
            "{message}"
        );
        assert!(!imported.exists());
    }
}

/// A file of `zeros` zero bytes (a hole: nothing written), then `end`.
fn zeros_then(path: &Path, zeros: u64, end: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = fs::File::create(path).expect("creates");
    file.write_all_at(end, zeros).expect("writes");
}

/// The 64 MiB limit is the item's, whatever the line end: an item of exactly the limit on
/// a CRLF line is the item the same line with LF gives (the '\r' is left out of the item,
/// as on any line). It was refused as too long, its '\r' counted.
#[test]
fn the_line_limit_is_the_items_whatever_the_line_end() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 1000);
    let crlf = dir.path().join("crlf");
    zeros_then(&crlf, 64 << 20, b"\r\n");
    ok(bloomery().arg("add").arg(&path).arg("-i").arg(&crlf));
    let lf = dir.path().join("lf");
    zeros_then(&lf, 64 << 20, b"\n");
    ok(bloomery().args(["check", "-q"]).arg(&path).arg("-i").arg(&lf));
    // One byte longer is an error with either line end, and with none (the last line).
    const LIMIT: u64 = 64 << 20;
    for (zeros, end) in [
        (LIMIT + 1, &b"\r\n"[..]),
        (LIMIT + 1, b"\n"),
        (LIMIT + 1, b"\r"),
        (LIMIT, b"x"),
    ] {
        let long = dir.path().join("long");
        zeros_then(&long, zeros, end);
        let message = error_of(bloomery().arg("add").arg(&path).arg("-i").arg(&long));
        assert!(
            message.contains("line 1 is longer than the 67108864-byte item limit"),
            "{end:?}: {message}"
        );
    }
}

/// Batches were bounded in items only: 4,096 lines of up to 64 MiB each (and `check` keeps
/// each line twice, as read and as its item) is 512 GiB. Twenty lines of 60 MiB under a
/// 1 GiB address space: they once went into one batch and the allocation aborted the
/// process.
#[test]
fn batches_of_long_lines_are_bounded_in_bytes() {
    let dir = open_dir();
    let path = dir.path().join("f.bloom");
    create(&path, 1000);
    let input = dir.path().join("long-lines");
    let line = 60u64 << 20;
    let file = fs::File::create(&input).expect("creates");
    file.set_len(20 * (line + 1)).expect("extends");
    for index in 1..=20 {
        use std::os::unix::fs::FileExt;
        file.write_all_at(b"\n", index * (line + 1) - 1).expect("writes");
    }
    drop(file);
    let output = with_address_space(&mut bloomery(), 1 << 30)
        .arg("check")
        .arg(&path)
        .arg("-i")
        .arg(&input)
        .stdout(Stdio::null())
        .output()
        .expect("runs");
    assert_clean_end(&output, "check of long lines");
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `dedup` into an overfull filter drops more and more new lines as seen, and said nothing:
/// 100,000 lines into a filter for 1,000 printed 5,302, and the next 100,000 new lines none,
/// with status 0 (an `add` to the same file warned). A finished `dedup` now warns as `add`
/// does, whatever keeps its filter.
#[test]
fn dedup_into_an_overfull_filter_says_so() {
    let dir = open_dir();
    let lines =
        |from: u32, count: u32| -> String { (from..from + count).map(|i| format!("{i}\n")).collect() };
    let [few, first, second] = [(1, 500), (1, 100_000), (100_001, 100_000)].map(|(from, count)| {
        let path = dir.path().join(format!("lines-{from}-{count}"));
        fs::write(&path, lines(from, count)).expect("writes");
        path
    });
    let warned = |output: &Output, what: &str| {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.starts_with("bloomery: warning: ") && stderr.contains("it was sized for"),
            "{what}: {stderr}"
        );
    };
    // (Split-block files keep no sizing: nothing to be past.)
    for variant in ["blocked", "classic", "counting"] {
        let path = dir.path().join(format!("{variant}.bloom"));
        // Within its capacity: no warning.
        let output = ok(bloomery()
            .args(["dedup", "--variant", variant, "--items", "1000", "--filter"])
            .arg(&path)
            .arg("-i")
            .arg(&few));
        assert!(
            output.stderr.is_empty(),
            "{variant}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let output = ok(bloomery()
            .args(["dedup", "--filter"])
            .arg(&path)
            .arg("-i")
            .arg(&first));
        warned(&output, variant);
        let output = ok(bloomery()
            .args(["dedup", "--filter"])
            .arg(&path)
            .arg("-i")
            .arg(&second));
        warned(&output, variant);
    }
    // Without a file: the filter in memory, sized by --items.
    let output = ok(bloomery().args(["dedup", "--items", "1000", "-i"]).arg(&first));
    warned(&output, "in memory");
    assert!(String::from_utf8_lossy(&output.stderr).contains("raise --items"));
    let output = ok(bloomery().args(["dedup", "--items", "1000", "-i"]).arg(&few));
    assert_quiet(&output);
}

/// A file with other hard links: the variants written whole renamed a new file over one
/// name and left the others the old filter (`add h1 apple; check h2 apple` said absent).
/// They are refused before anything changes (before an item is read); the variants updated
/// in place change the one file, which every name sees.
#[test]
fn files_with_other_hard_links_are_not_split() {
    let dir = open_dir();
    let h1 = dir.path().join("h1.bloom");
    let h2 = dir.path().join("h2.bloom");
    ok(bloomery()
        .args(["create", "--variant", "counting", "--items", "1000"])
        .arg(&h1));
    fs::hard_link(&h1, &h2).expect("links");
    let before = fs::read(&h1).expect("reads");
    let message = error_of(bloomery().arg("add").arg(&h1).arg("apple"));
    assert!(
        message.contains("has 2 hard links") && message.contains("nothing was changed"),
        "{message}"
    );
    // `dedup` refuses before it prints a line its filter would not keep.
    let lines = dir.path().join("lines");
    fs::write(&lines, "apple\npear\n").expect("writes");
    let output = bloomery()
        .args(["dedup", "--filter"])
        .arg(&h1)
        .stdin(Stdio::from(fs::File::open(&lines).expect("opens")))
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let message = error_of(bloomery().arg("remove").arg(&h2).arg("apple"));
    assert!(message.contains("has 2 hard links"), "{message}");
    let message = error_of(bloomery().args(["create", "--force", "--items", "10"]).arg(&h2));
    assert!(message.contains("has 2 hard links"), "{message}");
    assert_eq!(fs::read(&h1).expect("reads"), before);
    assert_eq!(fs::metadata(&h1).expect("exists").nlink(), 2);
    // Updated in place: both names see the item.
    let b1 = dir.path().join("b1.bloom");
    let b2 = dir.path().join("b2.bloom");
    create(&b1, 1000);
    fs::hard_link(&b1, &b2).expect("links");
    add(&b1, &["apple"]);
    assert!(all_present(&b2, &["apple".into()]));
    assert_eq!(fs::metadata(&b1).expect("exists").nlink(), 2);
}

/// An `add` into a file larger than the window keeps its hashes in spill files beside the
/// filter; a user who may write the file but not its directory got `f.bloom: Permission
/// denied`, blaming the file. The add now goes batch by batch instead, as into a smaller
/// file, which needs nothing but the file.
#[test]
fn a_spilled_add_whose_directory_refuses_spill_files_goes_batch_by_batch() {
    let dir = open_dir();
    let path = dir.path().join("big.bloom");
    create(&path, 1_000_000);
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(NOBODY)).ok();
    let input = dir.path().join("items");
    let items: Vec<String> = (0..50_000).map(|i| format!("spilled {i}")).collect();
    fs::write(
        &input,
        items.iter().map(|item| format!("{item}\n")).collect::<String>(),
    )
    .expect("writes");
    let Some(mut command) = as_nobody(&["add".as_ref(), path.as_os_str(), "-i".as_ref(), input.as_os_str()])
    else {
        eprintln!("skipped: needs root and setpriv to run as another user");
        return;
    };
    let output = ok(command.env("BLOOMERY_WINDOW_BYTES", "65536"));
    assert_quiet(&output);
    assert!(all_present(&path, &items));
    verify(&path);
    assert_eq!(
        leftovers(dir.path(), &["big.bloom", "items"]),
        Vec::<String>::new()
    );
}

/// A filter written whole (here scalable) that this user may write where it may not replace
/// it: a directory it may not write, or a file it does not own (its owner could not be kept
/// on the new file). `dedup` printed every new line, then failed to save the filter, and
/// the next run printed them again; `add` read its whole input first (here: up to a second
/// input that does not exist, whose error came first). Both now refuse before reading any
/// item.
#[test]
fn a_whole_file_writer_that_cannot_replace_its_file_fails_before_reading() {
    let closed = open_dir();
    // Everyone may write here (as /tmp), but the file is root's, mode 666.
    let shared = open_dir();
    fs::set_permissions(shared.path(), fs::Permissions::from_mode(0o777)).expect("chmod");
    let cases = [
        (
            closed.path().join("s.bloom"),
            Some(NOBODY),
            "cannot create a file in its directory",
        ),
        (shared.path().join("s.bloom"), None, "cannot keep its owner"),
    ];
    for (path, owner, expected) in &cases {
        ok(bloomery()
            .args(["create", "--variant", "scalable", "--items", "1000"])
            .arg(path));
        fs::set_permissions(path, fs::Permissions::from_mode(0o666)).expect("chmod");
        if let Some(owner) = owner {
            std::os::unix::fs::chown(path, Some(*owner), Some(*owner)).ok();
        }
        let dir = path.parent().expect("a directory");
        let input = dir.join("lines");
        fs::write(&input, "a\nb\nc\n").expect("writes");
        fs::set_permissions(&input, fs::Permissions::from_mode(0o644)).expect("chmod");
        let missing = dir.join("missing");
        for args in [
            vec![
                "dedup".as_ref(),
                "--filter".as_ref(),
                path.as_os_str(),
                "-i".as_ref(),
                input.as_os_str(),
            ],
            vec![
                "add".as_ref(),
                path.as_os_str(),
                "-i".as_ref(),
                input.as_os_str(),
                "-i".as_ref(),
                missing.as_os_str(),
            ],
        ] {
            let Some(mut command) = as_nobody(&args) else {
                eprintln!("skipped: needs root and setpriv to run as another user");
                return;
            };
            let output = command.output().expect("runs");
            assert_clean_end(&output, &format!("{args:?}"));
            assert_eq!(output.status.code(), Some(2), "{args:?}");
            assert!(
                output.stdout.is_empty(),
                "{args:?}: printed {:?}",
                String::from_utf8_lossy(&output.stdout)
            );
            let message = String::from_utf8_lossy(&output.stderr);
            assert!(message.contains(expected), "{args:?}: {message}");
        }
        assert_eq!(leftovers(dir, &["s.bloom", "lines"]), Vec::<String>::new());
    }
}

/// A spilled add's files have no name (unnamed from the start where the file system can
/// make such files, else unlinked once made); one that an older version, or a kill between
/// the making and the unlinking, left (`.NAME.PID.spill-N.tmp`) was never removed: the
/// next writer removes it when its process is gone, and leaves a live writer's.
#[test]
fn a_killed_writers_spill_file_is_removed_by_the_next_add() {
    let dir = open_dir();
    let path = dir.path().join("big.bloom");
    create(&path, 1_000_000);
    // A process id no process has (above Linux's largest, 2^22); this test's own is live.
    let dead = dir.path().join(".big.bloom.4294967295.spill-3.tmp");
    let live = format!(".big.bloom.{}.spill-0.tmp", std::process::id());
    // Killed between its making and its unlinking, a spill file is empty.
    fs::write(&dead, b"").unwrap();
    fs::write(dir.path().join(&live), b"").unwrap();
    let items: String = (0..50_000).map(|i| format!("spilled {i}\n")).collect();
    let mut child = bloomery()
        .arg("add")
        .arg(&path)
        .env("BLOOMERY_WINDOW_BYTES", "65536")
        .env("BLOOMERY_TIMINGS", "1")
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    child.stdin.take().unwrap().write_all(items.as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    // The add spilled (its pass over the payload is timed).
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("the pass over the payload"), "{stderr}");
    verify(&path);
    let mut expected = if Path::new("/proc/self").exists() {
        vec![live]
    } else {
        vec![live, ".big.bloom.4294967295.spill-3.tmp".to_owned()]
    };
    expected.sort();
    let mut left = leftovers(dir.path(), &["big.bloom"]);
    left.sort();
    assert_eq!(left, expected);
}

/// A file its user owns, of a group the user is not in: a rewrite cannot give the new file
/// that group, and is refused (the group's members would lose their access). The message
/// blamed the owner (`cannot keep its owner 65534:0 ...; run as its owner`, to its owner);
/// it now names the group.
#[test]
fn a_file_of_a_group_its_owner_is_not_in_is_refused_naming_the_group() {
    let dir = open_dir();
    std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).ok();
    let path = dir.path().join("grouped.bloom");
    ok(bloomery()
        .args(["create", "--variant", "counting", "--items", "1000"])
        .arg(&path));
    std::os::unix::fs::chown(&path, Some(NOBODY), Some(0)).ok();
    let Some(mut command) = as_nobody(&["add".as_ref(), path.as_os_str(), "x".as_ref()]) else {
        eprintln!("skipped: needs root and setpriv to run as another user");
        return;
    };
    let before = fs::read(&path).expect("reads");
    let message = error_of(&mut command);
    assert!(
        message.contains("cannot keep its group 0 (root), which this user is not in"),
        "{message}"
    );
    assert_eq!(fs::read(&path).expect("reads"), before);
    let metadata = fs::metadata(&path).expect("exists");
    assert_eq!((metadata.uid(), metadata.gid()), (NOBODY, 0));
    assert_eq!(leftovers(dir.path(), &["grouped.bloom"]), Vec::<String>::new());
}
