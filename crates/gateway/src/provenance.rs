//! Provenance: could someone other than the user have written a file mcpx takes as the
//! user's instructions (the config, whose server commands run as the user)?
//!
//! A file is trusted when it, and every folder above it up to the user's home (or up to
//! `/` for a file outside home), belongs to this user or to root and no one else may write
//! to it. The one exception is a folder with the sticky bit (like `/tmp`): others may add
//! names to it but not replace or remove ours, and the name beneath it is checked in turn,
//! so it must be ours or root's. Group-writable counts as writable by others: a group may
//! hold other users. Both the path as given and the path its symlinks lead to are checked,
//! so a link in a folder others control is refused as surely as the file it points to.
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
    let mut chains = vec![given];
    if chains[0] != real {
        chains.push(real);
    }
    chains.iter().find_map(|chain| untrusted_chain(chain, uid, home.as_deref()))
}

/// The first of `file` and the folders above it (up to `home`, if it is under it) that
/// someone other than `uid` or root owns or may write to.
fn untrusted_chain(file: &Path, uid: u32, home: Option<&Path>) -> Option<String> {
    let stop = home.filter(|h| file.starts_with(h));
    for (depth, at) in file.ancestors().enumerate() {
        if at.as_os_str().is_empty() {
            break;
        }
        let what = if depth == 0 { "the file" } else { "the folder" };
        let meta = match std::fs::metadata(at) {
            Ok(meta) => meta,
            Err(e) => return Some(format!("cannot check who owns {what} {}: {e}", at.display())),
        };
        if meta.uid() != uid && meta.uid() != 0 {
            return Some(format!(
                "{what} {} belongs to uid {}, not to this user ({uid}) or root",
                at.display(),
                meta.uid()
            ));
        }
        let mode = meta.mode();
        let sticky_folder = depth > 0 && meta.is_dir() && mode & STICKY != 0;
        if mode & 0o022 != 0 && !sticky_folder {
            let by = match (mode & 0o020 != 0, mode & 0o002 != 0) {
                (true, true) => "its group and others",
                (true, false) => "its group",
                _ => "others",
            };
            return Some(format!("{what} {} is writable by {by} (mode {:04o})", at.display(), mode & 0o7777));
        }
        if stop == Some(at) {
            break;
        }
    }
    None
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

        std::fs::remove_dir_all(&root).unwrap();
    }
}
