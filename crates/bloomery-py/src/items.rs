//! How a Python object becomes the item's bytes: the library's item road (its `Funnel`s),
//! so a filter made in Python answers the same in Rust, in the CLI and (classic) in Java.
//!
//! - `str`: its UTF-8 bytes (Rust `&str`, Guava's `stringFunnel(UTF_8)`, CLI `--format text`);
//! - `bytes`, `bytearray`, `memoryview` (and any other contiguous buffer of bytes): the
//!   bytes as they are (Guava's `byteArrayFunnel`, CLI `--format hex`);
//! - `int` (and objects with `__index__`, e.g. numpy integers): 8 bytes little-endian, from
//!   -2^63 to 2^64-1 (numbers of 2^63 and above as their two's complement, as the CLI's
//!   `--format long` does): Rust `i64`, Guava's `longFunnel`.
//!
//! Batches come in chunks copied out of Python objects while the GIL is held, so the
//! filter works on them with the GIL released; an item of more than [`CHUNK_BYTES`] is not
//! copied but kept where it lies, its owner held ([`Chunk::push_from`]).

use bloomery::hash::xxh3_64_bytes;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyIterator, PyList, PyMemoryView, PyString, PyTuple};

/// Items per chunk of a batch call: large enough that releasing and taking the GIL costs
/// nothing next to the work, small enough to stay in cache.
pub const CHUNK: usize = 16 * 1024;

/// Bytes of items per chunk of a batch call, at most (beyond the one item that crosses
/// it): a chunk of large items ends early, so that a batch of 16,384 items of 100 KB each
/// does not copy 1.6 GB at once.
pub const CHUNK_BYTES: usize = 8 << 20;

/// An `int` item's 8 bytes, or a `ValueError` for one outside the 64-bit range.
fn int_bytes(value: &Bound<'_, PyAny>) -> PyResult<[u8; 8]> {
    let pointer = value.as_ptr();
    let mut overflow = 0;
    // SAFETY: `value` is a live `int` (checked by the caller) and the GIL is held.
    let signed = unsafe { ffi::PyLong_AsLongLongAndOverflow(pointer, &mut overflow) };
    if overflow == 0 {
        if signed == -1
            && let Some(error) = PyErr::take(value.py())
        {
            return Err(error);
        }
        return Ok(signed.to_le_bytes());
    }
    if overflow > 0 {
        // SAFETY: as above; an error (past 2^64 - 1) is taken below.
        let unsigned = unsafe { ffi::PyLong_AsUnsignedLongLong(pointer) };
        match PyErr::take(value.py()) {
            None => return Ok(unsigned.to_le_bytes()),
            Some(error) if !error.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) => {
                return Err(error);
            }
            Some(_) => {}
        }
    }
    Err(PyValueError::new_err(format!(
        "item {} is not a 64-bit integer (from -2**63 to 2**64-1)",
        value.repr()?
    )))
}

/// The refusal of a numpy `datetime64` or `timedelta64` (a scalar, an element of an array
/// read as an iterable, or an array of them, 0-d included), whose bytes are its count of
/// its unit: taken as an item (a scalar exports them as 8 raw bytes), 2024-01-02 in days
/// and the same instant in seconds (equal values to numpy) would be different items, and
/// the filter would answer "absent" for an instant added in another unit. `None` for any
/// other object. Only numpy's own types are looked at (their C names start "numpy."),
/// without a call into Python for any other.
pub(crate) fn not_a_time_item(value: &Bound<'_, PyAny>) -> Option<PyErr> {
    // SAFETY: a live object's type, GIL held; `tp_name` is a NUL-terminated C string.
    let type_name = unsafe { std::ffi::CStr::from_ptr((*ffi::Py_TYPE(value.as_ptr())).tp_name) };
    let name = match type_name.to_bytes() {
        b"numpy.datetime64" => "datetime64",
        b"numpy.timedelta64" => "timedelta64",
        b"numpy.ndarray" => {
            let kind: String = value
                .getattr("dtype")
                .ok()?
                .getattr("kind")
                .ok()?
                .extract()
                .ok()?;
            match kind.as_str() {
                "M" => "datetime64",
                "m" => "timedelta64",
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(PyTypeError::new_err(format!(
        "a numpy.{name} is not a bloomery item: its bytes are a count of its own unit, so an \
         equal time in another unit would be another item; pass ints of one unit, \
         x.astype('{name}[ns]').astype('int64') (for an array too)"
    )))
}

fn not_an_item(value: &Bound<'_, PyAny>) -> PyErr {
    let name = type_name(value);
    let hint = if is_numpy_bool(&name) {
        ": bool(x) is one (a bool is the int item 0 or 1)"
    } else {
        ""
    };
    PyTypeError::new_err(format!(
        "a bloomery item is a str, a bytes-like object (bytes, bytearray, memoryview, a buffer \
         of bytes) or an int, not {name}{hint}"
    ))
}

/// Whether `value` exports a 0-d buffer of bytes (format `B`, `b` or `c`, with or without
/// a byte order: ctypes' `c_ubyte` is `<B`).
fn is_zero_d_bytes(value: &Bound<'_, PyAny>) -> bool {
    // SAFETY: GIL held.
    if unsafe { ffi::PyObject_CheckBuffer(value.as_ptr()) } == 0 {
        return false;
    }
    let Ok(view) = PyMemoryView::from(value) else {
        return false;
    };
    let ndim = view.getattr("ndim").and_then(|ndim| ndim.extract::<usize>());
    let format = view
        .getattr("format")
        .and_then(|format| format.extract::<String>());
    match (ndim, format) {
        (Ok(0), Ok(format)) => matches!(order_and_code(format.as_bytes()), (_, b'B' | b'b' | b'c')),
        _ => false,
    }
}

/// The type's name, qualified by its module when not a builtin: numpy's bool is named
/// "bool", which a Python bool, an item, is too.
fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .fully_qualified_name()
        .map_or_else(|_| "?".to_owned(), |name| name.to_string())
}

fn is_numpy_bool(type_name: &str) -> bool {
    type_name == "numpy.bool" || type_name == "numpy.bool_"
}

/// An exact `str` that is compact ASCII: its bytes (its UTF-8, since ASCII is UTF-8), read
/// where the str holds them; `None` for any other object. A batch's common item, in a few
/// instructions: no reference taken, no call into Python (9 fewer instructions an item of
/// `add_many`/`contains_many` on a list of str, of about 150 and 200, under callgrind).
///
/// # Safety
/// `pointer` must be a live object and the GIL held; the bytes live as long as the object.
#[inline]
unsafe fn ascii_str<'a>(pointer: *mut ffi::PyObject) -> Option<&'a [u8]> {
    // SAFETY: as the caller promises; a compact ASCII str holds `length` bytes inline.
    unsafe {
        if ffi::PyUnicode_CheckExact(pointer) == 0 || ffi::PyUnicode_IS_COMPACT_ASCII(pointer) == 0 {
            return None;
        }
        let data = ffi::PyUnicode_DATA(pointer).cast::<u8>();
        let len = ffi::PyUnicode_GET_LENGTH(pointer) as usize;
        Some(std::slice::from_raw_parts(data, len))
    }
}

/// The bytes of a common item, read without a call into Python that can fail: an exact
/// compact ASCII str ([`ascii_str`]) or an exact int from -2^63 to 2^63-1 (its 8 bytes
/// little-endian, written into `int`); `None` for any other object, which [`with_item`]'s
/// general road reads (ints from 2^63 up, and the errors, included). The one fast road of
/// batches, single calls and `item in filter` (`contains_slot`).
///
/// # Safety
/// `pointer` must be a live object and the GIL held; the bytes live as long as the object.
#[inline(always)]
pub(crate) unsafe fn common_item(pointer: *mut ffi::PyObject, int: &mut [u8; 8]) -> Option<&[u8]> {
    // SAFETY: as the caller promises. For an exact int, the conversion only fails by
    // overflow, which it reports in `overflow` without setting an exception.
    unsafe {
        if let Some(bytes) = ascii_str(pointer) {
            return Some(bytes);
        }
        if ffi::PyLong_CheckExact(pointer) == 0 {
            return None;
        }
        let value = match digits::value(pointer) {
            Some(value) => value,
            None => {
                let mut overflow = 0;
                let value = ffi::PyLong_AsLongLongAndOverflow(pointer, &mut overflow);
                if overflow != 0 {
                    return None;
                }
                value
            }
        };
        *int = value.to_le_bytes();
        Some(&int[..])
    }
}

/// An exact int's value read from its digits where they lie, on the interpreters whose int
/// layout is known: CPython 3.9 to 3.11 on a 64-bit machine with 30-bit digits (a sign and
/// digit count in `ob_size`, then the digits, least significant first). For the
/// benchmark's 62-bit ints (three digits), `scripts/python-instructions.sh` counted 369 ->
/// 332 instructions an item for a Python loop of `in`, 430 -> 395 for `add`, and 33 fewer
/// for either batch on a list, against `PyLong_AsLongLongAndOverflow`'s general loop; one-
/// digit ints, which that function converts on a short road of its own, cost 2-5 more.
///
/// The road is taken only after [`digits::enable`] has seen, at import, that the running
/// interpreter is one of those and that the road reads every value of a set of test ints
/// (the edges of each digit count and of the 64-bit range, both signs) as the C API does.
/// Anywhere else, or if any value differs, every int goes through the C API as before: a
/// wrong read here would put an int's bits where no other road looks for them.
pub(crate) mod digits {
    use std::sync::atomic::{AtomicBool, Ordering};

    use pyo3::ffi;
    use pyo3::prelude::*;

    /// Whether the direct road is on (set once, at import, by [`enable`]).
    static ON: AtomicBool = AtomicBool::new(false);

    /// Bits in a digit of the layout read here.
    const SHIFT: u32 = 30;

    /// The value of the exact int at `pointer` when the direct road is on and the value is
    /// from -2^63 to 2^63-1; `None` otherwise (the caller asks the C API).
    ///
    /// # Safety
    /// `pointer` must be a live exact int and the GIL held.
    #[inline(always)]
    pub(crate) unsafe fn value(pointer: *mut ffi::PyObject) -> Option<i64> {
        if !ON.load(Ordering::Relaxed) {
            return None;
        }
        // SAFETY: as the caller promises; the road is on only where an int is a
        // `PyVarObject` whose `ob_size` counts the 4-byte digits that follow it (checked
        // by `enable`), so the digits read here (at most |ob_size|) are the object's own.
        unsafe { read(pointer) }
    }

    /// The direct read itself (see [`value`]), without the check that the road is on.
    ///
    /// # Safety
    /// As [`value`], and the interpreter's ints must have the layout described there.
    #[inline(always)]
    unsafe fn read(pointer: *mut ffi::PyObject) -> Option<i64> {
        // SAFETY: as the caller promises.
        unsafe {
            let size = (*pointer.cast::<ffi::PyVarObject>()).ob_size;
            let digits = pointer
                .cast::<u8>()
                .add(size_of::<ffi::PyVarObject>())
                .cast::<u32>();
            let digit = |index: usize| u64::from(digits.add(index).read());
            let magnitude = match size.unsigned_abs() {
                0 => 0,
                1 => digit(0),
                2 => digit(0) | digit(1) << SHIFT,
                3 => {
                    let top = digit(2);
                    // 2 * 30 + 4 bits: more would not fit in 64 bits.
                    if top >= 1 << 4 {
                        return None;
                    }
                    digit(0) | digit(1) << SHIFT | top << (2 * SHIFT)
                }
                _ => return None,
            };
            if size >= 0 {
                i64::try_from(magnitude).ok()
            } else if magnitude <= 1 << 63 {
                // -2^63 included: 2^63 as i64 is i64::MIN, its own negation.
                Some((magnitude as i64).wrapping_neg())
            } else {
                None
            }
        }
    }

    /// Turns the direct road on if this interpreter's ints have the layout it reads and
    /// it reads a set of test ints as `PyLong_AsLongLongAndOverflow` does ([`on`] tells).
    /// Run once, at import.
    pub(crate) fn enable(py: Python<'_>) -> PyResult<()> {
        let sys = py.import("sys")?;
        let version = py.version_info();
        let version = (version.major, version.minor);
        let int_info = sys.getattr("int_info")?;
        let known = cfg!(target_pointer_width = "64")
            && sys
                .getattr("implementation")?
                .getattr("name")?
                .extract::<String>()?
                == "cpython"
            && ((3, 9)..=(3, 11)).contains(&version)
            && int_info.getattr("bits_per_digit")?.extract::<u32>()? == SHIFT
            && int_info.getattr("sizeof_digit")?.extract::<usize>()? == size_of::<u32>();
        ON.store(known && reads_as_the_c_api(py)?, Ordering::Relaxed);
        Ok(())
    }

    /// Whether the direct road is on.
    pub(crate) fn on() -> bool {
        ON.load(Ordering::Relaxed)
    }

    /// Whether [`read`] gives what the C API gives (a value, or an overflow as `None`) for
    /// every test int.
    fn reads_as_the_c_api(py: Python<'_>) -> PyResult<bool> {
        // Each digit count's edges (2^30k and its neighbours), the 64-bit range's, and
        // random values of 64 and 62 bits, each with both signs.
        let mut values: Vec<i128> = Vec::new();
        for shift in [0u32, 1, 29, 30, 31, 59, 60, 61, 62, 63, 64, 65, 89, 90, 91] {
            for delta in [-1i128, 0, 1] {
                values.push((1i128 << shift) + delta);
            }
        }
        let mut state = 0x5eed_u64;
        for _ in 0..256 {
            let random = bloomery::hash::splitmix64(&mut state);
            values.push(i128::from(random));
            values.push(i128::from(random >> 2));
        }
        let mut tests = Vec::with_capacity(2 * values.len());
        for value in values {
            tests.push(value.into_pyobject(py)?.into_any());
            tests.push((-value).into_pyobject(py)?.into_any());
        }
        for test in &tests {
            if !test.is_exact_instance_of::<pyo3::types::PyInt>() {
                return Ok(false);
            }
            let pointer = test.as_ptr();
            let mut overflow = 0;
            // SAFETY: a live exact int, the GIL held; an overflow sets no exception.
            let expected = unsafe { ffi::PyLong_AsLongLongAndOverflow(pointer, &mut overflow) };
            let expected = (overflow == 0).then_some(expected);
            // SAFETY: a live exact int, the GIL held; `enable` saw the layout `read` needs.
            if unsafe { read(pointer) } != expected {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// How many list items ahead a batch asks for the item objects: a list of 10^7 str holds
/// about 0.9 GB of objects, each read once, and without the hint each item waited for its
/// own object (docs/benchmarks.md, Python, fourth session).
const OBJECT_PREFETCH_DISTANCE: usize = 128;

/// Asks for the first two cache lines of a Python object: a str's header and, for a
/// short str, its bytes (a hint; never faults). With `NON_TEMPORAL` (AMD's CPUs) the
/// hint is `PREFETCHNTA`: each object is read once, and there it keeps the stream of
/// objects from pushing the filter's blocks out of the caches as much as it would. Else
/// `PREFETCHT0`: on an Intel Xeon the object stream of a list batch of 10^7 str cost 8.5
/// ns an item with the non-temporal hint and 5.9 with this one (docs/benchmarks.md,
/// Python, seventh session).
#[inline(always)]
fn prefetch_object<const NON_TEMPORAL: bool>(object: *mut ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_NTA, _MM_HINT_T0, _mm_prefetch};
        let second = object.cast::<i8>().wrapping_add(64);
        if NON_TEMPORAL {
            _mm_prefetch::<_MM_HINT_NTA>(object.cast());
            _mm_prefetch::<_MM_HINT_NTA>(second);
        } else {
            _mm_prefetch::<_MM_HINT_T0>(object.cast());
            _mm_prefetch::<_MM_HINT_T0>(second);
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = object;
}

/// Whether [`prefetch_object`] asks for objects with the non-temporal hint: on CPUs whose
/// vendor is AMD (CPUID leaf 0), where it was measured to help; read once per process.
fn non_temporal_objects() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static AMD: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *AMD.get_or_init(|| {
            // CPUID leaf 0 exists on every x86_64 CPU.
            let vendor = std::arch::x86_64::__cpuid(0);
            // "AuthenticAMD", in EBX, EDX, ECX order.
            (vendor.ebx, vendor.edx, vendor.ecx) == (0x6874_7541, 0x6974_6e65, 0x444d_4163)
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Pushes the common items (`common_item`) of `slots[index..stop]` into `chunk`, asking
/// for each object [`OBJECT_PREFETCH_DISTANCE`] slots ahead; stops at the first other
/// item and returns its position and object, or when the chunk is [full](Sink::full)
/// (no object: the chunk's count says where it ended).
///
/// # Safety
/// `slots` must be a live list's item array, the GIL held, and no Python code run while
/// this reads it.
#[inline(always)]
unsafe fn push_common_items<S: Sink, const NON_TEMPORAL: bool>(
    slots: &[*mut ffi::PyObject],
    index: usize,
    stop: usize,
    chunk: &mut S,
) -> Option<(usize, Option<*mut ffi::PyObject>)> {
    let mut int = [0; 8];
    for (at, &item) in (index..stop).zip(&slots[index..stop]) {
        if let Some(&later) = slots.get(at + OBJECT_PREFETCH_DISTANCE) {
            prefetch_object::<NON_TEMPORAL>(later);
        }
        // SAFETY: a live object, as the caller promises; the bytes are copied at once.
        match unsafe { common_item(item, &mut int) } {
            Some(bytes) if bytes.len() <= CHUNK_BYTES => chunk.push(bytes),
            // An other item, or a large str: the general road, which can hold it in place.
            _ => return Some((at, Some(item))),
        }
        if chunk.full() {
            return Some((at + 1, None));
        }
    }
    None
}

/// Calls `each` with the item's bytes.
#[inline(always)]
pub fn with_item<R>(value: &Bound<'_, PyAny>, each: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    // The common items first, and everything else in a function of its own, so that a
    // single-item call on a str saves and restores only the registers this path needs.
    let mut int = [0; 8];
    // SAFETY: a live object, GIL held; the bytes live as long as `value`.
    if let Some(bytes) = unsafe { common_item(value.as_ptr(), &mut int) } {
        return Ok(each(bytes));
    }
    with_other_item(value, each)
}

/// [`with_item`] for any item but a [`common_item`].
#[inline(never)]
fn with_other_item<R>(value: &Bound<'_, PyAny>, each: impl FnOnce(&[u8]) -> R) -> PyResult<R> {
    let pointer = value.as_ptr();
    // SAFETY: type checks of a live object, with the GIL held (the `cast`s below would
    // make the same checks, and build an error value on every miss).
    let (is_str, is_int, is_bytes) = unsafe {
        (
            ffi::PyUnicode_Check(pointer) != 0,
            ffi::PyLong_Check(pointer) != 0,
            ffi::PyBytes_Check(pointer) != 0,
        )
    };
    if is_str {
        // Not ASCII, or a subclass of str: the UTF-8 bytes the str caches.
        let mut len: ffi::Py_ssize_t = 0;
        // SAFETY: a str; the UTF-8 bytes live as long as the str (cached in it).
        let data = unsafe { ffi::PyUnicode_AsUTF8AndSize(pointer, &mut len) };
        if data.is_null() {
            return Err(PyErr::fetch(value.py()));
        }
        // SAFETY: `len` bytes at `data`, owned by the str, which `value` keeps alive.
        return Ok(each(unsafe {
            std::slice::from_raw_parts(data.cast::<u8>(), len as usize)
        }));
    }
    if is_int {
        return Ok(each(&int_bytes(value)?));
    }
    if is_bytes {
        // SAFETY: checked above.
        return Ok(each(unsafe { value.cast_unchecked::<PyBytes>() }.as_bytes()));
    }
    if let Some(error) = not_a_time_item(value) {
        return Err(error);
    }
    // A bytearray too: its bytes are read through an export of them, which keeps it
    // from being resized while `each` runs (which may wait for the filter's lock with the
    // GIL released, letting other threads run).
    if let Ok(buffer) = get_buffer(value) {
        let buffer = one_item_buffer(buffer)?;
        return Ok(each(buffer_slice(&buffer)?));
    }
    if value.hasattr("__index__")? {
        // SAFETY: GIL held; PyNumber_Index returns a new reference to an int, or NULL
        // with an exception set.
        let index = unsafe { Bound::from_owned_ptr_or_err(value.py(), ffi::PyNumber_Index(pointer))? };
        return Ok(each(&int_bytes(&index)?));
    }
    if is_zero_d_bytes(value) {
        // A buffer of bytes that none of the above took: a 0-d one (`memoryview(b"x")
        // .cast("B", shape=[])`), which has no bytes in a row to be an item of. Said as
        // such, where the message below would name a buffer of bytes among the items.
        return Err(PyTypeError::new_err(
            "a buffer item is its bytes in one or more dimensions: this one has none (a 0-d \
             buffer); bytes(item) is an item",
        ));
    }
    Err(not_an_item(value))
}

/// An object's buffer. One that pyo3 refuses for its null strides (a ctypes array, which
/// exports C-contiguous memory without them) is taken through `memoryview(value)`, which
/// fills them in: the same bytes, as `bytes(value)` has them.
pub fn get_buffer(value: &Bound<'_, PyAny>) -> PyResult<PyUntypedBuffer> {
    match PyUntypedBuffer::get(value) {
        Ok(buffer) => Ok(buffer),
        // SAFETY: GIL held.
        Err(error) if unsafe { ffi::PyObject_CheckBuffer(value.as_ptr()) } != 0 => {
            let Ok(view) = PyMemoryView::from(value) else {
                return Err(error);
            };
            PyUntypedBuffer::get(view.as_any())
        }
        Err(error) => Err(error),
    }
}

/// A copy of a filter's bytes in `buffer`, given to `method` (``from_bytes`` and the
/// like): a C-contiguous buffer of bytes. A buffer of wider elements is refused in the
/// method's words (its raw bytes are a cast away).
pub fn buffer_bytes(
    buffer: &PyUntypedBuffer,
    method: &str,
    check: impl FnOnce(u64) -> PyResult<()>,
) -> PyResult<Vec<u8>> {
    let format = buffer.format().to_bytes();
    if !matches!(order_and_code(format), (_, b'B' | b'b' | b'c')) {
        return Err(PyTypeError::new_err(format!(
            "{method}() takes a buffer of bytes, not of '{}' elements: bytes(data) or \
             memoryview(data).cast('B') gives its raw bytes",
            String::from_utf8_lossy(format)
        )));
    }
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err(format!(
            "{method}() takes a C-contiguous buffer: bytes(data) is a copy that is"
        )));
    }
    let bytes = buffer_slice(buffer)?;
    // Checked before the copy is made: a failed allocation aborts.
    check(bytes.len() as u64)?;
    Ok(bytes.to_vec())
}

/// A buffer given as one item: a buffer of bytes (`memoryview`, `array.array('B')`, a
/// uint8 array). A buffer of wider elements (a numpy int32 array, even of one element) is
/// refused: taken as its raw bytes, its elements would not be found as the int items they
/// look like, which the batch calls make of them.
fn one_item_buffer(buffer: PyUntypedBuffer) -> PyResult<PyUntypedBuffer> {
    let format = buffer.format().to_bytes();
    if matches!(order_and_code(format), (_, b'B' | b'b' | b'c')) {
        return Ok(buffer);
    }
    // Elements the batch calls take as int items.
    let elements = if element_of(&buffer, None).is_ok() {
        "add_many() and contains_many() take its elements as int items, and "
    } else {
        ""
    };
    Err(PyTypeError::new_err(format!(
        "a buffer of '{}' elements is not one item: {elements}bytes() of it is one item of \
         its raw bytes",
        String::from_utf8_lossy(format)
    )))
}

/// A buffer format's byte order and element code (struct module syntax; `@`, native, when
/// it gives none, and code 0 for a format of more than one element).
fn order_and_code(format: &[u8]) -> (u8, u8) {
    match format {
        [order @ (b'@' | b'=' | b'<' | b'>' | b'!'), code] => (*order, *code),
        [code] => (b'@', *code),
        _ => (b'@', 0),
    }
}

/// A buffer item's bytes (a bytearray, a memoryview, an mmap...), which must be
/// contiguous: read where they lie, not copied (a copy of an item larger than the memory
/// left aborted the process). The export `buffer` holds keeps them there, and their
/// owner from resizing or freeing them, as long as the slice lives.
fn buffer_slice(buffer: &PyUntypedBuffer) -> PyResult<&[u8]> {
    if !buffer.is_c_contiguous() {
        return Err(PyValueError::new_err("a buffer item must be C-contiguous"));
    }
    let len = buffer.len_bytes();
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: a contiguous buffer of `len` bytes, exported to `buffer` while it is held.
    Ok(unsafe { std::slice::from_raw_parts(buffer.buf_ptr().cast::<u8>(), len) })
}

/// A chunk of items copied out of Python objects: their bytes end to end, but for one
/// item of more than [`CHUNK_BYTES`], which is kept where it lies (the chunk ends there).
#[derive(Default)]
pub struct Chunk {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// The large item, and how many items come before it.
    large: Option<(usize, HeldItem)>,
}

/// An item's bytes read where they lie, with what keeps them there while a [`Chunk`] is
/// used without the GIL: a reference to the object that owns them and, for a buffer, an
/// export of it (which keeps a bytearray from being resized and an mmap from closing).
/// A chunk copied each item, and a copy of an item larger than the memory left (a 1 GiB
/// bytes in `update([big])` of a classic filter) aborted the process.
///
/// Only an exact bytes object's and an exact str's bytes are known never to change: those
/// may be read without the GIL. Any other buffer may change while it is read, read-only
/// export or not (`memoryview(bytearray).toreadonly()`, a numpy view with
/// `writeable=False` over a writable array, a read-only mmap of a file another process
/// writes): a writable one is not kept in place (see [`HeldItem::new`]), and a read-only
/// one is kept but read only with the GIL held ([`Chunk::detachable`]), so that no
/// Python thread writes it meanwhile. Read without the GIL, it was hashed torn: neither
/// value it held, a false negative for both. The GIL cannot stop another process writing
/// a shared mapping, nor native code that writes without the GIL (a numpy operation in
/// another thread): such an item is as torn as its writer leaves it, copied or not.
struct HeldItem {
    bytes: *const u8,
    len: usize,
    /// Whether the bytes are an exact bytes object's or an exact str's, which never
    /// change: then they may be read without the GIL.
    immutable: bool,
    /// A strong reference: the owner (and so the bytes) lives as long as this item, also
    /// while it is read without the GIL.
    _owner: Py<PyAny>,
    _export: Option<PyUntypedBuffer>,
}

// SAFETY: the bytes are only read, and what keeps them alive (a reference and an export,
// both `Send` and `Sync`) goes with them.
unsafe impl Send for HeldItem {}
// SAFETY: as above.
unsafe impl Sync for HeldItem {}

impl HeldItem {
    /// `item` kept where it lies, when it lies in memory that `owner` (the object it was
    /// read from) keeps while it is referenced: an exact bytes object's or str's own bytes
    /// (which never change), or a contiguous read-only buffer `owner` exports (which may
    /// change still: read with the GIL held). `None` otherwise: the caller copies it (with
    /// the GIL held).
    fn new(item: &[u8], owner: &Bound<'_, PyAny>) -> Option<Self> {
        let pointer = owner.as_ptr();
        let mut export = None;
        let mut immutable = true;
        // SAFETY: a live object, the GIL held: its bytes (a bytes object's, a str's cached
        // UTF-8) live as long as it does.
        let (start, len) = unsafe {
            // Exact types only: a subclass is kept as a buffer (read with the GIL held).
            if ffi::PyBytes_CheckExact(pointer) != 0 {
                (
                    ffi::PyBytes_AsString(pointer).cast::<u8>().cast_const(),
                    ffi::PyBytes_Size(pointer),
                )
            } else if ffi::PyUnicode_CheckExact(pointer) != 0 {
                let mut len = 0;
                let data = ffi::PyUnicode_AsUTF8AndSize(pointer, &mut len);
                if data.is_null() {
                    // Not reached: the item's bytes were read from this str.
                    drop(PyErr::take(owner.py()));
                    return None;
                }
                (data.cast::<u8>(), len)
            } else {
                let buffer = get_buffer(owner).ok()?;
                // An export, read-only or writable (a bytearray, a memoryview of one), is
                // not immutable memory: another thread may write it while the filter reads
                // it without the GIL (the item would be neither value it held, and a data
                // race). Kept where it lies, but read with the GIL held only: code that
                // writes it from Python holds the GIL; C code that releases it
                // (`readinto`, `recv_into`, numpy) can still write while it is read, as
                // it could while it was copied (a writable one was, with an allocation
                // that aborted when it failed). The export held keeps it from being
                // resized.
                immutable = false;
                let bytes = buffer_slice(&buffer).ok()?;
                let place = (bytes.as_ptr(), bytes.len() as isize);
                export = Some(buffer);
                place
            }
        };
        let (start, end) = (
            start as usize,
            (start as usize).saturating_add(len.max(0) as usize),
        );
        let (first, last) = (item.as_ptr() as usize, item.as_ptr() as usize + item.len());
        if !(start <= first && last <= end) {
            return None;
        }
        Some(Self {
            bytes: item.as_ptr(),
            len: item.len(),
            immutable,
            _owner: owner.clone().unbind(),
            _export: export,
        })
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: checked in `new` to lie in memory that `_owner` or `_export` keeps.
        unsafe { std::slice::from_raw_parts(self.bytes, self.len) }
    }
}

impl Chunk {
    /// A chunk with room for [`CHUNK`] items of 32 bytes before it grows.
    pub fn new() -> Self {
        Self {
            bytes: Vec::with_capacity(CHUNK * 32),
            ends: Vec::with_capacity(CHUNK),
            large: None,
        }
    }

    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.large = None;
    }

    /// An `int` item: 8 bytes, copied without a call to `memcpy`.
    #[inline]
    pub fn push_int(&mut self, item: [u8; 8]) {
        self.bytes.extend_from_slice(&item);
        self.ends.push(self.bytes.len());
    }

    pub fn push(&mut self, item: &[u8]) {
        self.bytes.extend_from_slice(item);
        self.ends.push(self.bytes.len());
    }

    /// An item read from `owner`: one of more than [`CHUNK_BYTES`] is kept where it lies
    /// ([`HeldItem`]) when it is the chunk's first such item (the chunk is then
    /// [full](Sink::full)); any other is copied.
    pub fn push_from(&mut self, item: &[u8], owner: &Bound<'_, PyAny>) {
        if item.len() > CHUNK_BYTES
            && self.large.is_none()
            && let Some(large) = HeldItem::new(item, owner)
        {
            self.large = Some((self.ends.len(), large));
            return;
        }
        self.push(item);
    }

    /// Whether its items may be read without the GIL: all but a large item kept in place
    /// whose owner may change it ([`HeldItem`]), which is read with the GIL held (no
    /// Python thread writes it meanwhile).
    pub fn detachable(&self) -> bool {
        self.large.as_ref().is_none_or(|(_, large)| large.immutable)
    }

    /// The items as slices, in the order they came, for the library's batch calls.
    pub fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        let mut slices: Vec<&[u8]> = self
            .ends
            .iter()
            .map(|&end| {
                let item = &self.bytes[start..end];
                start = end;
                item
            })
            .collect();
        if let Some((before, large)) = &self.large {
            slices.insert(*before, large.bytes());
        }
        slices
    }
}

/// Where [`Source::fill`] puts the items it reads.
pub trait Sink {
    /// Forgets what it holds.
    fn clear(&mut self);
    /// Takes an item's bytes.
    fn push(&mut self, item: &[u8]);
    /// Takes an item's bytes, read from `owner` (which keeps them while it lives).
    fn push_from(&mut self, item: &[u8], owner: &Bound<'_, PyAny>) {
        let _ = owner;
        self.push(item);
    }
    /// Takes an `int` item's 8 bytes.
    fn push_int(&mut self, item: [u8; 8]) {
        self.push(&item);
    }
    /// How many items it holds.
    fn count(&self) -> usize;
    /// Whether it holds [`CHUNK_BYTES`] of items' bytes or more: the chunk ends there.
    fn full(&self) -> bool {
        false
    }
}

impl Sink for Chunk {
    fn clear(&mut self) {
        Chunk::clear(self);
    }

    fn push(&mut self, item: &[u8]) {
        Chunk::push(self, item);
    }

    fn push_from(&mut self, item: &[u8], owner: &Bound<'_, PyAny>) {
        Chunk::push_from(self, item, owner);
    }

    fn push_int(&mut self, item: [u8; 8]) {
        Chunk::push_int(self, item);
    }

    fn count(&self) -> usize {
        match self.large {
            Some(_) => self.ends.len() + 1,
            None => self.ends.len(),
        }
    }

    #[inline(always)]
    fn full(&self) -> bool {
        self.bytes.len() >= CHUNK_BYTES || self.large.is_some()
    }
}

/// Items hashed as they are read, by a blocked filter's own item road
/// ([`BlockedBloomFilter::hash`]: XXH3-64 of the bytes with its seed, which is what its
/// `ItemHasher` computes): the filter's batch calls then take 8 bytes an item instead of
/// the item (no copy of the item's bytes, and the hash computed while they are in cache).
/// [`Source::for_each_hashed`] fills it.
///
/// [`BlockedBloomFilter::hash`]: bloomery::BlockedBloomFilter::hash
struct Hashes {
    seed: u64,
    /// The items' hashes, in order.
    hashes: Vec<u64>,
}

impl Sink for Hashes {
    fn clear(&mut self) {
        self.hashes.clear();
    }

    #[inline(always)]
    fn push(&mut self, item: &[u8]) {
        let hash = xxh3_64_bytes(item, self.seed);
        self.hashes.push(hash);
    }

    fn count(&self) -> usize {
        self.hashes.len()
    }
}

/// How the items of a buffer are read.
#[derive(Clone, Copy)]
pub enum Element {
    /// Integers of this many bytes, signed or not, big-endian or not: each is an `int` item.
    Int {
        size: usize,
        signed: bool,
        big_endian: bool,
    },
    /// Raw bytes, `item_size` per item.
    Raw { item_size: usize },
}

/// What a buffer's format says about its elements (struct module syntax).
fn element_of(buffer: &PyUntypedBuffer, item_size: Option<usize>) -> PyResult<Element> {
    let format = buffer.format().to_string_lossy().into_owned();
    // Pointers are never items, even as raw bytes; padded or wide text is, asked for. A
    // buffer of elements that are no items is a TypeError, as the same buffer given as
    // one item is (both were ValueError in a batch and TypeError alone).
    if let Some((even_raw, why)) = not_items(&format)
        && (item_size.is_none() || even_raw)
    {
        return Err(PyTypeError::new_err(why));
    }
    if let Some(item_size) = item_size {
        if item_size == 0 {
            return Err(PyValueError::new_err("item_size must be at least 1"));
        }
        // Items cut across the buffer's elements are none of its values (item_size=3 of an
        // int32 array made 8 items of 6 integers, without a word).
        let element = buffer.item_size();
        if !item_size.is_multiple_of(element) {
            return Err(PyValueError::new_err(format!(
                "item_size={item_size} cuts the buffer's {element}-byte '{format}' elements: \
                 an item is a whole number of them"
            )));
        }
        if !buffer.len_bytes().is_multiple_of(item_size) {
            return Err(PyValueError::new_err(format!(
                "a buffer of {} bytes does not split into items of {item_size} bytes",
                buffer.len_bytes()
            )));
        }
        return Ok(Element::Raw { item_size });
    }
    let (order, code) = order_and_code(format.as_bytes());
    let big_endian = match order {
        b'>' | b'!' => true,
        b'<' => false,
        _ => cfg!(target_endian = "big"),
    };
    let size = buffer.item_size();
    match code {
        b'b' | b'B' | b'c' => Err(PyTypeError::new_err(
            "a buffer of bytes needs item_size= (add_many's and contains_many's) to say how \
             many bytes make an item (or pass a list of bytes objects); for 8-bit integers \
             as int items, pass the array as int64 (numpy: a.astype('int64'))",
        )),
        b'h' | b'i' | b'l' | b'q' | b'n' if matches!(size, 2 | 4 | 8) => Ok(Element::Int {
            size,
            signed: true,
            big_endian,
        }),
        b'H' | b'I' | b'L' | b'Q' | b'N' if matches!(size, 2 | 4 | 8) => Ok(Element::Int {
            size,
            signed: false,
            big_endian,
        }),
        _ => Err(PyTypeError::new_err(format!(
            "a buffer of '{format}' elements holds no items: use integers (e.g. a numpy \
             int64 array, each element an int item) or bytes with item_size="
        ))),
    }
}

/// Why a buffer of this format holds no items, for the formats whose raw bytes would look
/// like items but are not (and whether item_size= is refused too): numpy's text arrays
/// and object arrays. Their elements cut as raw bytes with item_size= (what the general
/// message advises for other formats) would be NUL-padded or UCS-4 bytes, never found as
/// the bytes or str items they hold (b"a" from an 'S3' array is stored as b"a\0\0"), or
/// pointers. `None` for any other format.
fn not_items(format: &str) -> Option<(bool, String)> {
    let code = format
        .trim_start_matches(['@', '=', '<', '>', '!'])
        .trim_start_matches(|c: char| c.is_ascii_digit());
    let why = match code {
        "s" => (
            false,
            format!(
                "a buffer of '{format}' elements (a numpy bytes array, dtype 'S') holds no items: \
                 numpy pads each with NULs to the array's width (b\"a\" in an 'S3' array is \
                 b\"a\\x00\\x00\"), and the padded bytes would not find the item; pass \
                 arr.tolist(), a list of bytes"
            ),
        ),
        "w" | "u" => (
            false,
            format!(
                "a buffer of '{format}' elements (a numpy str array, dtype 'U', or an \
                 array.array('u')) holds no items: it holds each str as {}, padded with NULs \
                 to the array's width, not as the UTF-8 bytes a str item is; pass \
                 arr.tolist(), a list of str",
                if code == "w" {
                    "UCS-4 (4 bytes a character)"
                } else {
                    "UCS-2 (2 bytes a character)"
                }
            ),
        ),
        "O" => (
            true,
            format!(
                "a buffer of '{format}' elements (a numpy object array) holds pointers to \
                 Python objects, not items: pass arr.tolist(), a list of the objects"
            ),
        ),
        _ => return None,
    };
    Some(why)
}

/// An integer element's item bytes: the value as an `int` item (8 bytes little-endian).
#[inline]
fn int_element(raw: &[u8], size: usize, signed: bool, big_endian: bool) -> [u8; 8] {
    macro_rules! read {
        ($signed:ty, $unsigned:ty) => {{
            let bytes = raw.try_into().unwrap_or_default();
            let value = if big_endian {
                <$unsigned>::from_be_bytes(bytes)
            } else {
                <$unsigned>::from_le_bytes(bytes)
            };
            if signed {
                // Sign-extended to 64 bits, as the int it is.
                (value as $signed as i64).to_le_bytes()
            } else {
                (value as u64).to_le_bytes()
            }
        }};
    }
    match size {
        8 => read!(i64, u64),
        4 => read!(i32, u32),
        _ => read!(i16, u16),
    }
}

/// Pushes a buffer's items (`bytes`, whole elements) into `chunk`. The element type is
/// matched once, not per item, and the loops are a function of their own: inside `fill`,
/// beside the list road, how the compiler laid out this loop changed with the list road's
/// code (a numpy int64 `add_many` went from 141-148 to 114-117 M items/s in
/// `scripts/bench-python.sh` when the list road began reading int digits).
#[inline(never)]
fn push_elements<S: Sink>(bytes: &[u8], element: Element, chunk: &mut S) {
    match element {
        // numpy's int64 and uint64 on this machine: the 8 bytes are the item's.
        Element::Int {
            size: 8,
            big_endian: false,
            ..
        } => {
            for raw in bytes.chunks_exact(8) {
                chunk.push_int(int_element(raw, 8, false, false));
            }
        }
        Element::Int {
            size,
            signed,
            big_endian,
        } => {
            for raw in bytes.chunks_exact(size) {
                chunk.push_int(int_element(raw, size, signed, big_endian));
            }
        }
        Element::Raw { item_size } => {
            for raw in bytes.chunks_exact(item_size) {
                chunk.push(raw);
            }
        }
    }
}

/// `error`, a bad item's in a batch add, with a note (on Python 3.11 and later, which
/// show an exception's notes) that the `added` items of the call before it were added and
/// the rest were not: a batch add stops at a bad item, as at a refused one.
/// A list that changed size during the call (a `RuntimeError`, [`changed_size`]) had no
/// bad item: the note then counts the items read before the change.
pub fn noted_added(py: Python<'_>, error: PyErr, added: usize) -> PyErr {
    let changed =
        error.is_instance_of::<PyRuntimeError>(py) && error.value(py).to_string().starts_with(CHANGED_SIZE);
    let note = match (added, changed) {
        (0, false) => "no item of this call was added: the bad one was its first".to_owned(),
        (0, true) => "no item of this call was added".to_owned(),
        (1, false) => "the 1 item of this call before the bad one was added, the rest were not".to_owned(),
        (1, true) => "the 1 item of this call read before the list changed size was added, the rest were not"
            .to_owned(),
        (_, false) => {
            format!("the {added} items of this call before the bad one were added, the rest were not")
        }
        (_, true) => format!(
            "the {added} items of this call read before the list changed size were added, the rest were not"
        ),
    };
    noted(py, error, note)
}

/// The note of a batch add that a signal's handler (Ctrl-C's `KeyboardInterrupt`) ended
/// between two chunks, after `added` of the call's items went in (at least the first
/// chunk's: no call is interrupted before one).
pub fn interrupted_note(added: usize) -> String {
    match added {
        1 => "the 1 item of this call before the interruption was added, the rest were not".to_owned(),
        _ => format!("the {added} items of this call before the interruption were added, the rest were not"),
    }
}

/// Runs the handlers of signals that came during a batch, between its chunks (a batch of
/// any size took Ctrl-C only once it ended): an error when one raises, noted with how
/// many of the call's items were added (`added`, `None` for a lookup, which changed
/// nothing).
pub fn check_signals_between_chunks(py: Python<'_>, added: Option<usize>) -> PyResult<()> {
    py.check_signals().map_err(|error| match added {
        Some(added) => noted(py, error, interrupted_note(added)),
        None => error,
    })
}

/// `error`, of an argument of `update` that is not a batch of items, with a note saying how
/// many items of the call's iterables before it were added: none were tried from it.
fn noted_bad_argument(py: Python<'_>, error: PyErr, added: usize) -> PyErr {
    let note = match added {
        0 => "no item of this call was added".to_owned(),
        1 => "the 1 item of this call's iterables before the bad argument was added, the rest were not"
            .to_owned(),
        _ => format!(
            "the {added} items of this call's iterables before the bad argument were added, the rest were not"
        ),
    };
    noted(py, error, note)
}

/// `error` with `note` added (Python 3.11 and later).
pub(crate) fn noted(py: Python<'_>, error: PyErr, note: String) -> PyErr {
    let value = error.value(py);
    if value.hasattr("add_note").unwrap_or(false) {
        // A note that cannot be added leaves the error as it is.
        let _ = value.call_method1("add_note", (note,));
    }
    error
}

/// `update(*iterables)`: `insert` adds each iterable's items (given the items of the call
/// added before it, for the note on a bad item's error) and returns how many it added. An
/// argument that is not an iterable of items ends the call after the items of the ones
/// before it, as a bad item does.
pub fn each_iterable(
    py: Python<'_>,
    iterables: &Bound<'_, PyTuple>,
    mut insert: impl FnMut(Source<'_>, usize) -> PyResult<usize>,
) -> PyResult<()> {
    let mut added = 0;
    for iterable in iterables.iter() {
        let source = Source::new(&iterable, None).map_err(|error| noted_bad_argument(py, error, added))?;
        added += insert(source, added)?;
    }
    Ok(())
}

/// Room in `answers` for `more` answers (amortized, as a push grows it): a `MemoryError`
/// when the system refuses it, instead of the abort of a failed allocation.
pub fn reserve_answers(answers: &mut Vec<bool>, more: usize) -> PyResult<()> {
    answers.try_reserve(more).map_err(|_| {
        let count = answers.len().saturating_add(more);
        PyMemoryError::new_err(format!(
            "cannot allocate {count} bytes for the answers of {count} items: the system refused them"
        ))
    })
}

/// Refuses a list whose length is no longer `len`, its length when the batch call began.
fn changed_size(list: &Bound<'_, PyList>, len: usize) -> PyResult<()> {
    let now = list.len();
    if now == len {
        return Ok(());
    }
    Err(PyRuntimeError::new_err(format!(
        "{CHANGED_SIZE} (from {len} to {now} items)"
    )))
}

/// The start of [`changed_size`]'s error.
const CHANGED_SIZE: &str = "list changed size during the batch call";

/// Where a batch's items come from.
pub enum Source<'py> {
    /// A buffer (bytes, numpy arrays, array.array, memoryview): read directly.
    Buffer {
        buffer: PyUntypedBuffer,
        element: Element,
        count: usize,
        /// The object exporting it (which keeps an item of it in place: [`HeldItem`]).
        object: Bound<'py, PyAny>,
    },
    /// A list or tuple, indexed.
    Sequence(Bound<'py, PyAny>, usize),
    /// Any other iterable.
    Iterator(Bound<'py, PyIterator>),
}

impl<'py> Source<'py> {
    /// The source for `items`: a buffer when it has one (and is not a str), else a
    /// sequence or iterable of items. Only a list or tuple itself is read by index: a
    /// subclass's items are what its own `__iter__` gives (it may override it, and
    /// `__len__`), as for any other iterable.
    pub fn new(items: &Bound<'py, PyAny>, item_size: Option<usize>) -> PyResult<Self> {
        let is_buffer_like = !(items.is_instance_of::<PyList>() || items.is_instance_of::<PyTuple>());
        if item_size.is_some() && !is_buffer_like {
            return Err(PyTypeError::new_err("item_size= is for buffers (bytes, arrays)"));
        }
        if let Ok(list) = items.cast_exact::<PyList>() {
            return Ok(Source::Sequence(items.clone(), list.len()));
        }
        if let Ok(tuple) = items.cast_exact::<PyTuple>() {
            return Ok(Source::Sequence(items.clone(), tuple.len()));
        }
        if items.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "a str is one item, not a batch: use add(text), or a list of str",
            ));
        }
        // A bytes object given whole, with no item_size=: one item, as a str is (update's
        // refusal told it to pass an item_size= that update does not take).
        if item_size.is_none()
            && (items.is_exact_instance_of::<PyBytes>() || items.is_exact_instance_of::<PyByteArray>())
        {
            return Err(PyTypeError::new_err(
                "a bytes object is one item, not a batch: use add(data), a list of bytes, or \
                 add_many(data, item_size=N) for items of N bytes each",
            ));
        }
        // A time, or an array of them: not items, whether read as a buffer (item_size=),
        // element by element or as one.
        if let Some(error) = not_a_time_item(items) {
            return Err(error);
        }
        if let Ok(buffer) = get_buffer(items) {
            if !buffer.is_c_contiguous() {
                return Err(PyValueError::new_err("a buffer of items must be C-contiguous"));
            }
            let element = element_of(&buffer, item_size)?;
            let count = match element {
                Element::Int { size, .. } => buffer.len_bytes() / size,
                Element::Raw { item_size } => buffer.len_bytes() / item_size,
            };
            return Ok(Source::Buffer {
                buffer,
                element,
                count,
                object: items.clone(),
            });
        }
        if item_size.is_some() {
            return Err(PyTypeError::new_err("item_size= is for buffers (bytes, arrays)"));
        }
        Ok(Source::Iterator(items.try_iter()?))
    }

    /// Room for a lookup's answers, one per item when the source knows how many, asked
    /// for before any item is read: a `MemoryError` when the system refuses it (an
    /// allocation that fails aborts the process; a 2 GiB buffer of 1-byte items wants 2
    /// GiB of answers).
    pub fn answers(&self) -> PyResult<Vec<bool>> {
        let mut answers = Vec::new();
        reserve_answers(&mut answers, self.len_hint())?;
        Ok(answers)
    }

    /// How many items, when known.
    pub fn len_hint(&self) -> usize {
        match self {
            Source::Buffer { count, .. } => *count,
            Source::Sequence(_, len) => *len,
            Source::Iterator(_) => 0,
        }
    }

    /// Hashes the items a chunk at a time, as a blocked filter (plain or atomic) with
    /// `seed` hashes them, and hands each chunk's hashes to `each` (which may release the
    /// GIL: the hashes are the items' only copy it needs).
    /// A bad item ends the batch after the items before it were handed to `each`; with
    /// `adding` (the items of the call added before this source), its error notes how
    /// many those were ([`noted_added`]). So does a signal's handler that raises (Ctrl-C)
    /// between two chunks ([`check_signals_between_chunks`]). Returns how many items were
    /// read.
    pub fn for_each_hashed(
        &mut self,
        py: Python<'_>,
        seed: u64,
        adding: Option<usize>,
        mut each: impl FnMut(&[u64]) -> PyResult<()>,
    ) -> PyResult<usize> {
        let mut hashes = Hashes {
            seed,
            hashes: Vec::with_capacity(CHUNK),
        };
        let mut position = 0;
        loop {
            let (read, error) = self.next_chunk(position, &mut hashes);
            if read > 0 {
                each(&hashes.hashes)?;
                check_signals_between_chunks(py, adding.map(|before| before + position + read))?;
            }
            position += read;
            if let Some(error) = error {
                return Err(match adding {
                    Some(before) => noted_added(py, error, before + position),
                    None => error,
                });
            }
            if read == 0 {
                return Ok(position);
            }
        }
    }

    /// [`fill`](Self::fill), but a bad item (or an iterator that raises) ends the chunk
    /// instead of emptying it: the items before it are in `chunk`, their count returned
    /// beside the error, so that a batch add adds every item before the bad one.
    pub fn next_chunk<S: Sink>(&mut self, position: usize, chunk: &mut S) -> (usize, Option<PyErr>) {
        match self.fill(position, chunk) {
            Ok(read) => (read, None),
            Err(error) => (chunk.count(), Some(error)),
        }
    }

    /// [`for_each_hashed`](Self::for_each_hashed) for lookups: `results` grows by one
    /// slot per item, and `each` gets each chunk's hashes with their slots to answer in.
    pub fn lookup_hashed(
        &mut self,
        py: Python<'_>,
        seed: u64,
        results: &mut Vec<bool>,
        mut each: impl FnMut(&[u64], &mut [bool]) -> PyResult<()>,
    ) -> PyResult<()> {
        self.for_each_hashed(py, seed, None, |hashes| {
            let start = results.len();
            reserve_answers(results, hashes.len())?;
            results.resize(start + hashes.len(), false);
            each(hashes, &mut results[start..])
        })
        .map(drop)
    }

    /// Reads up to [`CHUNK`] items from `position` into `chunk` (cleared first), fewer
    /// when their bytes reach [`CHUNK_BYTES`]; returns how many were read (0 at the end).
    /// On an error, `chunk` holds the items before the bad one.
    pub fn fill<S: Sink>(&mut self, position: usize, chunk: &mut S) -> PyResult<usize> {
        chunk.clear();
        match self {
            Source::Buffer {
                buffer,
                element,
                count,
                object,
            } => {
                let (width, base) = match *element {
                    Element::Int { size, .. } => (size, buffer.buf_ptr().cast::<u8>()),
                    Element::Raw { item_size } => (item_size, buffer.buf_ptr().cast::<u8>()),
                };
                let most = CHUNK.min((CHUNK_BYTES / width).max(1));
                let end = (*count).min(position.saturating_add(most));
                if position >= end {
                    return Ok(0);
                }
                // SAFETY: the buffer is C-contiguous, `count * width` bytes long, and held
                // (with the GIL) while these bytes are copied.
                let bytes = unsafe {
                    std::slice::from_raw_parts(base.add(position * width), (end - position) * width)
                };
                match *element {
                    // One item (`most` is 1), which a chunk may keep where it lies.
                    Element::Raw { item_size } if item_size > CHUNK_BYTES => chunk.push_from(bytes, object),
                    _ => push_elements(bytes, *element, chunk),
                }
                Ok(end - position)
            }
            Source::Sequence(sequence, len) => {
                if let Ok(list) = sequence.cast::<PyList>() {
                    let pointer = list.as_ptr();
                    // The list may change between chunks, and while an item that is not a
                    // common one converts (that may run Python code, which may change the
                    // list): its length and item array are read again after each such item.
                    // A length other than the call's first is a `RuntimeError`, as Python's
                    // "dictionary changed size during iteration": the answers would not
                    // match the items (an item that cleared the list gave 3 answers for 5).
                    changed_size(list, *len)?;
                    let end = list.len().min(position.saturating_add(CHUNK));
                    let non_temporal = non_temporal_objects();
                    let mut index = position;
                    while index < end {
                        // SAFETY: a live list, GIL held: its first `size` slots hold live
                        // objects (borrowed), and stay so while no Python code runs. None
                        // runs while `slots` is used: a common item converts without any,
                        // and the loop leaves `slots` behind before the other items.
                        let slots = unsafe {
                            let size = ffi::PyList_GET_SIZE(pointer).max(0) as usize;
                            let items = (*pointer.cast::<ffi::PyListObject>()).ob_item;
                            if size == 0 {
                                &[]
                            } else {
                                std::slice::from_raw_parts(items, size)
                            }
                        };
                        if slots.len() != *len {
                            changed_size(list, *len)?;
                        }
                        let stop = end.min(slots.len());
                        if index >= stop {
                            break;
                        }
                        // SAFETY: as above.
                        let other = unsafe {
                            if non_temporal {
                                push_common_items::<S, true>(slots, index, stop, chunk)
                            } else {
                                push_common_items::<S, false>(slots, index, stop, chunk)
                            }
                        };
                        let Some((at, item)) = other else {
                            index = stop;
                            continue;
                        };
                        let Some(item) = item else {
                            // Full.
                            break;
                        };
                        // SAFETY: a live object the list holds; now a reference of our own.
                        let item = unsafe { Bound::from_borrowed_ptr(list.py(), item) };
                        with_item(&item, |bytes| chunk.push_from(bytes, &item))?;
                        index = at + 1;
                        if chunk.full() {
                            break;
                        }
                    }
                    Ok(chunk.count())
                } else {
                    let tuple = sequence.cast::<PyTuple>()?;
                    let end = tuple.len().min(position.saturating_add(CHUNK));
                    for index in position..end.max(position) {
                        let item = tuple.get_borrowed_item(index)?;
                        with_item(&item, |bytes| chunk.push_from(bytes, &item))?;
                        if chunk.full() {
                            break;
                        }
                    }
                    Ok(chunk.count())
                }
            }
            Source::Iterator(iterator) => {
                while chunk.count() < CHUNK && !chunk.full() {
                    let Some(item) = iterator.next() else {
                        break;
                    };
                    let item = item?;
                    with_item(&item, |bytes| chunk.push_from(bytes, &item))?;
                }
                Ok(chunk.count())
            }
        }
    }
}
