//! Hides passwords given on the command line from `ps` and
//! `/proc/PID/cmdline`, as the mysql client does, by overwriting them in
//! the process's own argv memory with `x`.
//!
//! std reads argv lazily from that same memory, so the caller must copy
//! the arguments (`std::env::args_os().collect()`) first. On glibc, functions in `.init_array` receive the original
//! `argc`/`argv`; that is how we find the memory to overwrite.

use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

static ARGC: AtomicUsize = AtomicUsize::new(0);
static ARGV: AtomicPtr<*mut libc::c_char> = AtomicPtr::new(std::ptr::null_mut());

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[used]
#[link_section = ".init_array"]
static CAPTURE: extern "C" fn(libc::c_int, *mut *mut libc::c_char, *mut *mut libc::c_char) =
    capture;

#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
extern "C" fn capture(
    argc: libc::c_int,
    argv: *mut *mut libc::c_char,
    _env: *mut *mut libc::c_char,
) {
    ARGC.store(argc.max(0) as usize, Ordering::Relaxed);
    ARGV.store(argv, Ordering::Relaxed);
}

/// Which bytes of one argument are secret: the range to overwrite.
/// `prev` is the previous argument (for `--dsn URL`).
pub fn secret_range(arg: &[u8], prev: Option<&[u8]>) -> Option<std::ops::Range<usize>> {
    if let Some(rest) = arg.strip_prefix(b"--password=") {
        return (!rest.is_empty()).then(|| arg.len() - rest.len()..arg.len());
    }
    if arg.len() > 2 && arg.starts_with(b"-p") && arg[2] != b'=' {
        return Some(2..arg.len());
    }
    if arg.starts_with(b"-p=") && arg.len() > 3 {
        return Some(3..arg.len());
    }
    // The relay's --client-user NAME:PASSWORD.
    let user_value = match arg.strip_prefix(b"--client-user=") {
        Some(rest) => Some((arg.len() - rest.len(), rest)),
        None if prev == Some(b"--client-user") => Some((0, arg)),
        None => None,
    };
    if let Some((start, v)) = user_value {
        let colon = v.iter().position(|&b| b == b':')?;
        return (colon + 1 < v.len()).then(|| start + colon + 1..arg.len());
    }
    // --dsn URL, and bench's --via URL.
    let url_start = if let Some(rest) = arg
        .strip_prefix(b"--dsn=")
        .or_else(|| arg.strip_prefix(b"--via="))
    {
        arg.len() - rest.len()
    } else if prev == Some(b"--dsn") || prev == Some(b"--via") {
        0
    } else {
        return None;
    };
    dsn_password_range(&arg[url_start..]).map(|r| r.start + url_start..r.end + url_start)
}

fn dsn_password_range(url: &[u8]) -> Option<std::ops::Range<usize>> {
    let scheme = url.windows(3).position(|w| w == b"://")? + 3;
    let rest = &url[scheme..];
    let auth_end = rest.iter().position(|&b| b == b'/').unwrap_or(rest.len());
    let at = rest[..auth_end].iter().rposition(|&b| b == b'@')?;
    let colon = rest[..at].iter().position(|&b| b == b':')?;
    Some(scheme + colon + 1..scheme + at)
}

/// Overwrites every password in this process's argv with `x`.
pub fn mask_passwords() {
    let argc = ARGC.load(Ordering::Relaxed);
    let argv = ARGV.load(Ordering::Relaxed);
    if argv.is_null() {
        return;
    }
    let mut prev: Option<Vec<u8>> = None;
    for i in 1..argc {
        // SAFETY: argv has argc valid, NUL-terminated, writable strings for
        // the life of the process (the kernel placed them on our stack);
        // we only overwrite bytes inside each string, never its NUL.
        unsafe {
            let p = *argv.add(i);
            if p.is_null() {
                break;
            }
            let len = libc::strlen(p);
            let bytes = std::slice::from_raw_parts_mut(p as *mut u8, len);
            if bytes == b"--" {
                break;
            }
            if let Some(r) = secret_range(bytes, prev.as_deref()) {
                bytes[r].fill(b'x');
            }
            prev = Some(bytes.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(arg: &str, prev: Option<&str>) -> String {
        let mut b = arg.as_bytes().to_vec();
        if let Some(r) = secret_range(&b, prev.map(str::as_bytes)) {
            b[r].fill(b'x');
        }
        String::from_utf8(b).expect("utf8")
    }

    #[test]
    fn masks_every_spelling() {
        assert_eq!(masked("--password=abc", None), "--password=xxx");
        assert_eq!(masked("-pabc", None), "-pxxx");
        assert_eq!(masked("-p=abc", None), "-p=xxx");
        assert_eq!(masked("-p", None), "-p");
        assert_eq!(
            masked("--dsn=mysql://u:pw@h/db", None),
            "--dsn=mysql://u:xx@h/db"
        );
        assert_eq!(
            masked("mysql://u:pw@h/db", Some("--dsn")),
            "mysql://u:xx@h/db"
        );
        assert_eq!(masked("mysql://u@h/db", Some("--dsn")), "mysql://u@h/db");
        assert_eq!(
            masked("mysql://u:pw@h:6033/", Some("--via")),
            "mysql://u:xx@h:6033/"
        );
        assert_eq!(
            masked("--via=mysql://u:pw@h/", None),
            "--via=mysql://u:xx@h/"
        );
        assert_eq!(masked("127.0.0.1:6033", Some("--via")), "127.0.0.1:6033");
        assert_eq!(masked("--port=3306", None), "--port=3306");
        assert_eq!(masked("--client-user=app:pw", None), "--client-user=app:xx");
        assert_eq!(masked("app:pw", Some("--client-user")), "app:xx");
        assert_eq!(masked("root", Some("--user")), "root");
        assert_eq!(masked("a:b", Some("--user")), "a:b");
    }
}
