//! Opening a dump: a file or stdin, gzip or zstd detected by magic bytes.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// An opened dump: its decompressed byte stream, the compression found,
/// and the compressed size when known (for progress).
pub struct Opened {
    pub reader: Box<dyn Read + Send>,
    pub compression: Compression,
    pub size: Option<u64>,
    /// A counter of compressed bytes consumed, for progress.
    pub raw_read: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

struct Counting<R> {
    inner: R,
    n: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.n
            .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(n)
    }
}

/// Wraps decompressor errors with what they mean for a dump.
struct Named<R> {
    inner: R,
    what: &'static str,
}

impl<R: Read> Read for Named<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            let text = e.to_string();
            // A stream cut short (an interrupted copy or download) is
            // named as such; anything else is damage.
            let cut = e.kind() == io::ErrorKind::UnexpectedEof
                || text.contains("incomplete")
                || text.contains("unexpected end");
            let what = if cut {
                format!("the {} stream is truncated: it ends before its end marker ({e}); the statements read before this point were loaded, the one cut off was not", self.what)
            } else {
                format!("corrupt {} stream: {e}", self.what)
            };
            io::Error::new(e.kind(), what)
        })
    }
}

/// Is this path the standard input (`-`)? The one place that decides.
pub fn is_stdin(path: &Path) -> bool {
    path == Path::new("-")
}

/// How to name an input in messages: `stdin` for `-`.
pub fn display_name(path: &Path) -> String {
    if is_stdin(path) {
        "stdin".into()
    } else {
        path.display().to_string()
    }
}

/// Opens `path` (`-` is stdin) and picks the decompressor by magic bytes.
pub fn open(path: &Path) -> io::Result<Opened> {
    open_counted(path, std::sync::Arc::default())
}

/// [`open`], counting the bytes read on disk into `raw_read` (several
/// files of one input share one counter).
pub fn open_counted(
    path: &Path,
    raw_read: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> io::Result<Opened> {
    let (inner, size): (Box<dyn Read + Send>, Option<u64>) = if is_stdin(path) {
        (Box::new(io::stdin()), None)
    } else {
        let f = File::open(path)?;
        let meta = f.metadata()?;
        if meta.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "is a directory, not a dump file",
            ));
        }
        let size = meta.is_file().then_some(meta.len());
        (Box::new(f), size)
    };
    let counted = Counting {
        inner,
        n: raw_read.clone(),
    };
    let mut buf = BufReader::with_capacity(1 << 20, counted);
    let head = buf.fill_buf()?;
    let compression = if head.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    };
    let reader: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(buf),
        Compression::Gzip => Box::new(Named {
            inner: flate2::bufread::MultiGzDecoder::new(buf),
            what: "gzip",
        }),
        Compression::Zstd => Box::new(Named {
            inner: zstd::stream::read::Decoder::with_buffer(buf)?,
            what: "zstd",
        }),
    };
    Ok(Opened {
        reader,
        compression,
        size,
        raw_read,
    })
}
