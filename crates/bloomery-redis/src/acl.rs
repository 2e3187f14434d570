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

use redis_module::{Context, Status, raw};

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
            let Ok(c_name) = CString::new(name) else {
                return Status::Err;
            };
            // SAFETY: called within OnLoad with the module's context and a C string.
            let command = unsafe { get_command(ctx.ctx, c_name.as_ptr()) };
            if command.is_null() {
                ctx.log_warning(&format!(
                    "bloomery: the ACL table names {name}, which is not one of the module's commands"
                ));
                return Status::Err;
            }
            commands.push((command, name, categories));
        }
    }
    let Some(set_categories) = set_categories else {
        ctx.log_notice(
            "bloomery: this Redis (before 7.2) has no ACL categories for module commands: the BF.* commands are in @all only",
        );
        return Status::Ok;
    };
    let bloom = match add_category {
        // SAFETY: called within OnLoad with the module's context and a C string.
        Some(add) => {
            let added = unsafe { add(ctx.ctx, CATEGORY.as_ptr()) } == raw::REDISMODULE_OK as c_int;
            if !added {
                ctx.log_warning(
                    "bloomery: could not add the @bloom ACL category (is another module using it?)",
                );
            }
            added
        }
        None => {
            ctx.log_notice(
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
            ctx.log_warning(&format!(
                "bloomery: could not put {name} in the ACL categories {categories}"
            ));
            return Status::Err;
        }
    }
    Status::Ok
}
