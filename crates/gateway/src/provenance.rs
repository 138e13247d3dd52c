//! Provenance: could someone other than the user have written a file mcpx takes as the
//! user's instructions (the config, whose server commands run as the user)?
//!
//! A file is trusted when it, and every folder above it up to the user's home (or up to
//! `/` for a file outside home), belongs to this user or to root and no one else may write
//! to it. The one exception is a folder with the sticky bit (like `/tmp`): others may add
//! names to it but not replace or remove ours, and the name beneath it is checked in turn,
//! so it must be ours or root's. Group-writable counts as writable by others: a group may
//! hold other users. The path as given, every path a symlink on the way leads on to, and
//! the real path are checked, each name as itself (a link must be ours or root's: its
//! owner may re-point it at any moment), so a link in a folder others control, or one
//! another uid owns, is refused as surely as the file it points to. [`open_trusted`]
//! then ties the check to the file actually read: opened once, checked on its descriptor.
//!
//! This must never follow the caller's word about trust: it reads only what the kernel
//! says about owners and modes.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// `S_ISVTX`: in a folder, only a name's owner (or the folder's) may remove or rename it.
const STICKY: u32 = 0o1000;

/// Why `path` is not trusted, naming the file or folder at fault; `None` when it is.
pub fn untrusted(path: &Path) -> Option<String> {
    let uid = rustix::process::geteuid().as_raw();
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .and_then(|h| PathBuf::from(h).canonicalize().ok())
        .filter(|h| h != Path::new("/"));
    let given = match std::path::absolute(path) {
        Ok(p) => p,
        Err(e) => return Some(format!("cannot tell where {} is: {e}", path.display())),
    };
    let real = match given.canonicalize() {
        Ok(p) => p,
        Err(e) => return Some(format!("cannot resolve {}: {e}", given.display())),
    };
    // Every path the name passes through on its way to the file: the one given, then for
    // each symlink met, the path it leads on to (a hop between two links is in neither
    // the given path nor the real one, yet whoever controls it chooses the file).
    let mut chains = vec![given, real];
    let mut next = 0;
    while let Some(chain) = chains.get(next) {
        if next > MAX_HOPS {
            return Some(format!("{} leads through more than {MAX_HOPS} symlinks", path.display()));
        }
        match untrusted_chain(chain, uid, home.as_deref()) {
            Err(why) => return Some(why),
            Ok(onward) => chains.extend(onward),
        }
        next += 1;
    }
    None
}

/// `path` opened for reading, once, when it is trusted: the descriptor's file must be the
/// one [`untrusted`] checked by name (same device and inode), so swapping a name between
/// the check and the read gains nothing. Opened without blocking and only if a regular
/// file, so a FIFO planted where the config should be holds nobody.
pub fn open_trusted(path: &Path) -> Result<std::fs::File, Refused> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(Refused::Read)?;
    let opened = file.metadata().map_err(Refused::Read)?;
    if !opened.is_file() {
        let why = format!("{} is not a regular file", path.display());
        return Err(Refused::Read(std::io::Error::new(std::io::ErrorKind::InvalidInput, why)));
    }
    if let Some(why) = untrusted(path) {
        return Err(Refused::Untrusted(why));
    }
    let checked = std::fs::metadata(path).map_err(Refused::Read)?;
    if (checked.dev(), checked.ino()) != (opened.dev(), opened.ino()) {
        return Err(Refused::Untrusted(format!("the file {} was replaced while it was checked", path.display())));
    }
    Ok(file)
}

/// Why [`open_trusted`] gave no file.
#[derive(Debug)]
pub enum Refused {
    /// There is no such file to read, or it cannot be read.
    Read(std::io::Error),
    /// Someone other than the user may have written it; the reason names who and where.
    Untrusted(String),
}

/// As many symlinks as the kernel follows in one path (`MAXSYMLINKS`).
const MAX_HOPS: usize = 40;

/// The first of `file` and the folders above it (up to `home`, if it is under it) that
/// someone other than `uid` or root owns or may write to; else the paths its symlinks lead
/// on to. Each name is looked at itself (`lstat`): a link is its owner's to re-point, so
/// it must be ours or root's whatever it points to now.
fn untrusted_chain(file: &Path, uid: u32, home: Option<&Path>) -> Result<Vec<PathBuf>, String> {
    let stop = home.filter(|h| file.starts_with(h));
    let mut onward = Vec::new();
    for (depth, at) in file.ancestors().enumerate() {
        if at.as_os_str().is_empty() {
            break;
        }
        let meta = match std::fs::symlink_metadata(at) {
            Ok(meta) => meta,
            Err(e) => {
                let what = if depth == 0 { "the file" } else { "the folder" };
                return Err(format!("cannot check who owns {what} {}: {e}", at.display()));
            }
        };
        let link = meta.file_type().is_symlink();
        let what = match (link, depth) {
            (true, _) => "the symlink",
            (false, 0) => "the file",
            (false, _) => "the folder",
        };
        if meta.uid() != uid && meta.uid() != 0 {
            return Err(format!(
                "{what} {} belongs to uid {}, not to this user ({uid}) or root",
                at.display(),
                meta.uid()
            ));
        }
        if link {
            let target =
                std::fs::read_link(at).map_err(|e| format!("cannot read the symlink {}: {e}", at.display()))?;
            let rest = file.strip_prefix(at).unwrap_or(Path::new(""));
            let led = at.parent().unwrap_or(Path::new("/")).join(target);
            onward.push(if rest.as_os_str().is_empty() { led } else { led.join(rest) });
        }
        let mode = meta.mode();
        // A link's own mode means nothing (always 0777): its folder and target are checked.
        let sticky_folder = depth > 0 && meta.is_dir() && mode & STICKY != 0;
        if !link && mode & 0o022 != 0 && !sticky_folder {
            let by = match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => "its group and others",
                (true, false) => "its group",
                _ => "others",
            };
            return Err(format!("{what} {} is writable by {by} (mode {:04o})", at.display(), mode & 0o7777));
        }
        if stop == Some(at) {
            break;
        }
    }
    Ok(onward)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_file_others_may_write_or_under_such_a_folder_is_untrusted() {
        let root = std::env::temp_dir().join(format!("mcpx-provenance-{}", std::process::id()));
        let dir = root.join("config");
        std::fs::create_dir_all(&dir).unwrap();
        chmod(&root, 0o755);
        chmod(&dir, 0o755);
        let file = dir.join("config.json");
        std::fs::write(&file, "{}").unwrap();
        chmod(&file, 0o644);
        assert_eq!(untrusted(&file), None);

        chmod(&file, 0o664);
        assert!(untrusted(&file).is_some_and(|why| why.contains("writable by its group") && why.contains("0664")));
        chmod(&file, 0o644);

        chmod(&dir, 0o777);
        let why = untrusted(&file).expect("a world-writable folder");
        assert!(why.contains(&format!("the folder {}", dir.display())) && why.contains("others"), "{why}");
        // Sticky: others may add names but not replace ours.
        chmod(&dir, 0o1777);
        assert_eq!(untrusted(&file), None);

        // A link from a folder others may write to is refused, wherever it points.
        chmod(&dir, 0o755);
        let open = root.join("open");
        std::fs::create_dir_all(&open).unwrap();
        chmod(&open, 0o777);
        let link = open.join("config.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(untrusted(&link).is_some_and(|why| why.contains(&open.display().to_string())));

        // A link of ours leading on through that folder: the hop is in neither the path
        // given nor the real one, yet whoever may write there chooses the file.
        let through = dir.join("through.json");
        std::os::unix::fs::symlink(&link, &through).unwrap();
        assert!(untrusted(&through).is_some_and(|why| why.contains(&open.display().to_string())));

        // A link another uid owns, though beneath a sticky folder: its owner may re-point it.
        chmod(&open, 0o1777);
        assert_eq!(untrusted(&link), None);
        // Giving a link away takes root (the e2e suite runs as root too).
        if !rustix::process::geteuid().is_root() {
            std::fs::remove_dir_all(&root).unwrap();
            return;
        }
        rustix::fs::chownat(
            rustix::fs::CWD,
            &link,
            Some(rustix::process::Uid::from_raw(65534)),
            None,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
        assert!(untrusted(&link).is_some_and(|why| why.contains("the symlink") && why.contains("65534")));

        // Opened once: what is read is the file checked.
        assert!(open_trusted(&file).is_ok());
        assert!(matches!(open_trusted(&link), Err(Refused::Untrusted(_))));

        std::fs::remove_dir_all(&root).unwrap();
    }
}
