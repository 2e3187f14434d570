//! `BF.ADD` and `BF.EXISTS`, the single-item commands a cache guard sends once per request,
//! registered with Redis directly rather than through `redis_module!`'s command list. The
//! macro's dispatcher copies the arguments into a new `Vec` of retained strings on every
//! call (an allocation, a retain and a release per argument: about 300 of the roughly 5,000
//! instructions a pipelined `BF.EXISTS` costs the server, counted under callgrind); here the
//! arguments are wrapped in place, on the stack (`BF.EXISTS` wraps only its key and reads
//! the item where it is), and the command code is the same.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{Context, RedisError, RedisString, Status, raw};

use crate::commands;

/// `argv` as `N` strings, or `None` if the command has another number of arguments.
///
/// # Safety
/// `argv` must point to `argc` valid strings, as Redis passes to a command.
unsafe fn arguments<const N: usize>(
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> Option<[RedisString; N]> {
    if argv.is_null() || usize::try_from(argc).ok()? != N {
        return None;
    }
    // SAFETY: `argv` holds `N` strings, as the caller promises. A string made without a
    // context holds a plain reference, released when it is dropped.
    Some(std::array::from_fn(|i| {
        RedisString::new(None, unsafe { *argv.add(i) })
    }))
}

extern "C" fn bf_add(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    // SAFETY: Redis passes `argc` valid strings in `argv`.
    let result = match unsafe { arguments::<3>(argv, argc) } {
        Some(args) => commands::add(&context, &args),
        None => Err(RedisError::WrongArity),
    };
    context.reply(result) as c_int
}

extern "C" fn bf_exists(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let result = if argv.is_null() || argc != 3 {
        Err(RedisError::WrongArity)
    } else {
        // SAFETY: Redis passes 3 valid strings in `argv`, alive for the whole call: the
        // key is wrapped (a reference taken and released), the item read where it is.
        let (key, item) = unsafe {
            (
                RedisString::new(None, *argv.add(1)),
                RedisString::string_as_slice(*argv.add(2)),
            )
        };
        commands::exists(&context, &key, item)
    };
    context.reply(result) as c_int
}

type Handler = extern "C" fn(*mut raw::RedisModuleCtx, *mut *mut raw::RedisModuleString, c_int) -> c_int;

/// The commands: name, handler, flags (as in `lib.rs`'s list; key at position 1).
const COMMANDS: [(&CStr, Handler, &CStr); 2] = [
    (c"bf.add", bf_add, c"write deny-oom"),
    (c"bf.exists", bf_exists, c"readonly"),
];

/// Registers the commands; called once from the module's `OnLoad`.
pub fn register(ctx: &Context) -> Status {
    for (name, handler, flags) in COMMANDS {
        // SAFETY: Redis filled in CreateCommand before OnLoad; the names and flags are
        // static C strings, and the handlers have the signature Redis calls.
        let created = unsafe {
            raw::RedisModule_CreateCommand
                .map(|create| create(ctx.ctx, name.as_ptr(), Some(handler), flags.as_ptr(), 1, 1, 1))
        };
        if created != Some(raw::Status::Ok as c_int) {
            crate::log::warning(
                ctx,
                &format!("bloomery: could not register {}", name.to_string_lossy()),
            );
            return Status::Err;
        }
    }
    Status::Ok
}
