//! The `@bloom` ACL category, where the server has it: every `BF.*` command is in
//! `@bloom` and in `@read` or `@write` and `@fast` or `@slow` (the table in `lib.rs`), so
//! `ACL SETUSER alice +@bloom` or `-@bloom` grants or takes them all at once.
//!
//! - Redis 7.4 and later (and Valkey 8, which has the same module API): all of it.
//! - Redis 7.2: module commands can be put in the server's categories, but a module cannot
//!   add one: `@read`/`@write`/`@fast`/`@slow` only, and a notice in the log.
//! - Redis 7.0: module commands are in no category but `@all`; the module loads as
//!   before, with a notice in the log.
//!
//! Every name in the table must be a command of the module (checked at load wherever the
//! server can look commands up, 7.0 included): a wrong name stops the module from loading.

use std::ffi::CString;
use std::os::raw::c_int;

use redis_module::{Context, Status, commands, raw};

/// The category the module adds.
const CATEGORY: &std::ffi::CStr = c"bloom";

/// Puts each `(command, categories)` of `table` in its categories and in `@bloom`, as far
/// as the server allows (see the module docs). Call it from OnLoad, after the commands are
/// created.
pub fn register(ctx: &Context, table: &[(&str, &str)]) -> Status {
    // SAFETY: reading function pointers Redis filled in when the module was loaded.
    let (get_command, set_categories, add_category) = unsafe {
        (
            raw::RedisModule_GetCommand,
            raw::RedisModule_SetCommandACLCategories,
            raw::RedisModule_AddACLCategory,
        )
    };
    let mut commands = Vec::with_capacity(table.len());
    if let Some(get_command) = get_command {
        for &(name, categories) in table {
            let Some(command) = command_named(ctx, get_command, name, "ACL") else {
                return Status::Err;
            };
            commands.push((command, name, categories));
        }
    }
    let Some(set_categories) = set_categories else {
        crate::log::notice(
            ctx,
            "bloomery: this Redis (before 7.2) has no ACL categories for module commands: the BF.* commands are in @all only",
        );
        return Status::Ok;
    };
    let bloom = match add_category {
        // SAFETY: called within OnLoad with the module's context and a C string.
        Some(add) => {
            let added = unsafe { add(ctx.ctx, CATEGORY.as_ptr()) } == raw::REDISMODULE_OK as c_int;
            if !added {
                crate::log::warning(
                    ctx,
                    "bloomery: could not add the @bloom ACL category (is another module using it?)",
                );
            }
            added
        }
        None => {
            crate::log::notice(
                ctx,
                "bloomery: this Redis (7.2) cannot add ACL categories: the BF.* commands are in @read/@write and @fast/@slow, and there is no @bloom",
            );
            false
        }
    };
    for (command, name, categories) in commands {
        let text = if bloom {
            format!("{categories} bloom")
        } else {
            categories.to_string()
        };
        let Ok(c_text) = CString::new(text) else {
            return Status::Err;
        };
        // SAFETY: `command` is the module's command, looked up above within OnLoad.
        if unsafe { set_categories(command, c_text.as_ptr()) } != raw::REDISMODULE_OK as c_int {
            crate::log::warning(
                ctx,
                &format!("bloomery: could not put {name} in the ACL categories {categories}"),
            );
            return Status::Err;
        }
    }
    Status::Ok
}

/// Gives each `(command, flags)` of `table` one key spec, its key at argument 1, with the
/// key-spec flags named in `flags` (`RO`/`RW`, and `ACCESS`, `INSERT`, `UPDATE` or
/// `DELETE`: what the command does with the value, as Redis flags its own commands). Redis
/// checks per-key ACL permissions (`%R~`, `%W~`) against them: without specs, every
/// command's key was "RW access update", so a user who may only read keys could not run
/// `BF.EXISTS`, nor one who may only write, `BF.ADD`. Redis 7.0 and later; older servers
/// (no key specs) get a notice in the log.
pub fn register_key_specs(ctx: &Context, table: &[(&str, &str)]) -> Status {
    // SAFETY: reading function pointers Redis filled in when the module was loaded.
    let (Some(get_command), Some(set_info)) = (unsafe { raw::RedisModule_GetCommand }, unsafe {
        raw::RedisModule_SetCommandInfo
    }) else {
        crate::log::notice(
            ctx,
            "bloomery: this Redis (before 7.0) has no key specs for module commands",
        );
        return Status::Ok;
    };
    const VERSION: raw::RedisModuleCommandInfoVersion = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    for &(name, flags) in table {
        let Some(flags) = key_spec_flags(flags) else {
            crate::log::warning(
                ctx,
                &format!("bloomery: the key-spec table gives {name} unknown flags {flags}"),
            );
            return Status::Err;
        };
        let Some(command) = command_named(ctx, get_command, name, "key-spec") else {
            return Status::Err;
        };
        // One key, at argument 1 (a range of one key, from there), and the zeroed end.
        let mut specs = commands::get_redis_key_spec(vec![commands::KeySpec::new(
            None,
            flags,
            commands::BeginSearch::new_index(1),
            commands::FindKeys::new_range(0, 1, 0),
        )]);
        let info = raw::RedisModuleCommandInfo {
            version: &VERSION,
            summary: std::ptr::null(),
            complexity: std::ptr::null(),
            since: std::ptr::null(),
            history: std::ptr::null_mut(),
            tips: std::ptr::null(),
            // 0: the arity the command was created with (the command checks its own).
            arity: 0,
            key_specs: specs.as_mut_ptr(),
            args: std::ptr::null_mut(),
        };
        // SAFETY: `command` is the module's, looked up above within OnLoad; `info` and the
        // specs it points to live through the call, which copies them.
        if unsafe { set_info(command, &info) } != raw::REDISMODULE_OK as c_int {
            crate::log::warning(ctx, &format!("bloomery: could not set the key spec of {name}"));
            return Status::Err;
        }
    }
    Status::Ok
}

/// The module's command `name`, which the `table` (its kind, for the log) names; `None`,
/// logged, when there is none: a wrong name in a table stops the module from loading.
fn command_named(
    ctx: &Context,
    get_command: GetCommand,
    name: &str,
    table: &str,
) -> Option<*mut raw::RedisModuleCommand> {
    let c_name = CString::new(name).ok()?;
    // SAFETY: called within OnLoad with the module's context and a C string.
    let command = unsafe { get_command(ctx.ctx, c_name.as_ptr()) };
    if command.is_null() {
        crate::log::warning(
            ctx,
            &format!("bloomery: the {table} table names {name}, which is not one of the module's commands"),
        );
        return None;
    }
    Some(command)
}

/// `RedisModule_GetCommand`.
type GetCommand = unsafe extern "C" fn(
    *mut raw::RedisModuleCtx,
    *const std::os::raw::c_char,
) -> *mut raw::RedisModuleCommand;

/// The key-spec flags named in `words` (`RO ACCESS`, `RW INSERT`, ...).
fn key_spec_flags(words: &str) -> Option<commands::KeySpecFlags> {
    words
        .split_whitespace()
        .try_fold(commands::KeySpecFlags::empty(), |flags, word| {
            let flag = match word {
                "RO" => commands::KeySpecFlags::READ_ONLY,
                "RW" => commands::KeySpecFlags::READ_WRITE,
                "ACCESS" => commands::KeySpecFlags::ACCESS,
                "INSERT" => commands::KeySpecFlags::INSERT,
                "UPDATE" => commands::KeySpecFlags::UPDATE,
                "DELETE" => commands::KeySpecFlags::DELETE,
                _ => return None,
            };
            Some(flags | flag)
        })
}
