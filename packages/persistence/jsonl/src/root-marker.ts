import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { ioError, JsonlPersistenceError } from './errors.js'
import { fsyncDirSync, isErrno, tempSibling } from './fs-io.js'
import type { JsonlCompression } from './types.js'

/** The file at a root that records its format and encoding (its name has a dot, so it never looks like a session directory). */
export const MARKER_FILE = 'dsh-persistence.json'

/**
 * The log file in each session directory, named by the root's encoding (one
 * root holds one encoding). Known without loading the codec, so that a backend
 * that only follows the change feed can still say where a log is (`logPath`).
 */
export const LOG_FILE_NAMES: Readonly<Record<JsonlCompression, string>> = Object.freeze({ zstd: 'log.jsonl.zst', none: 'log.jsonl' })
const FORMAT = 'dsh-session-persistence-jsonl'
const VERSION = 1
/** The format a marker that is not JSON reads as. */
const UNREADABLE = '(unreadable)'

interface Marker {
  readonly format: string
  readonly version: number
  readonly compression: JsonlCompression
}

/**
 * Creates the root (0700) and its marker (0600) if needed, and checks that an
 * existing root uses `compression`: one root holds one encoding. Returns the
 * root's encoding. Synchronous because it runs once, when the backend is
 * created.
 *
 * `readOnly` never creates anything: the root and its marker must exist
 * (else `JSONL_PERSISTENCE_NOT_A_ROOT`), and an omitted `compression` means
 * "whatever the root holds". Reads never write.
 */
export function openRoot(root: string, compression: JsonlCompression | undefined, readOnly = false): JsonlCompression {
  const path = join(root, MARKER_FILE)
  if (readOnly) {
    let marker: Marker | undefined
    try {
      marker = readMarker(path)
    } catch (error) {
      throw notARoot(root, `its marker ${path} cannot be read (${(error as Error).message})`)
    }
    if (marker === undefined) throw notARoot(root, `it has no ${MARKER_FILE}`)
    return checkMarker(root, path, marker, compression)
  }
  try {
    return createRoot(root, path, compression)
  } catch (error) {
    if (error instanceof JsonlPersistenceError) throw error
    throw ioError(`open the root ${root} (create it and its ${MARKER_FILE})`, error)
  }
}

/** The writable open of `openRoot`: creates what is missing; a file system failure is thrown as it is (the caller types it). */
function createRoot(root: string, path: string, compression: JsonlCompression | undefined): JsonlCompression {
  const created = mkdirSync(root, { recursive: true, mode: 0o700 })
  if (created !== undefined) fsyncDirSync(dirname(created))
  let marker = readMarkerOf(root, path)
  if (marker === undefined) {
    const temp = tempSibling(path)
    writeFileSync(temp, `${JSON.stringify({ format: FORMAT, version: VERSION, compression: compression ?? 'zstd' } satisfies Marker)}\n`, {
      flag: 'wx',
      mode: 0o600,
    })
    try {
      const fd = openSync(temp, 'r')
      fsyncSync(fd)
      closeSync(fd)
      // link, not rename: two processes opening a fresh root with different encodings must not both win.
      linkSync(temp, path)
      fsyncDirSync(root)
    } catch (error) {
      if (!isErrno(error, 'EEXIST')) throw error
    } finally {
      unlinkSync(temp)
    }
    marker = readMarkerOf(root, path)
  }
  return checkMarker(root, path, marker, compression)
}

function checkMarker(root: string, path: string, marker: Marker | undefined, compression: JsonlCompression | undefined): JsonlCompression {
  const fault =
    marker === undefined || marker.format === UNREADABLE
      ? 'is not a JSON marker'
      : marker.format !== FORMAT
        ? `names the format ${JSON.stringify(marker.format)}, not ${FORMAT}`
        : marker.version !== VERSION
          ? `names root version ${JSON.stringify(marker.version)}; this package reads version ${VERSION} only`
          : marker.compression !== 'zstd' && marker.compression !== 'none'
            ? `names the unknown compression ${JSON.stringify(marker.compression)}`
            : undefined
  if (marker === undefined || fault !== undefined) {
    throw new JsonlPersistenceError(
      'JSONL_PERSISTENCE_UNSUPPORTED_ROOT',
      `${path} ${fault ?? 'is missing'}: ${root} is not a root this package can open. Point the backend at another directory, or open this one with the build of @dsh/session-persistence-jsonl that wrote it.`,
      { details: { root, marker: path } },
    )
  }
  if (compression !== undefined && marker.compression !== compression) {
    throw new JsonlPersistenceError(
      'JSONL_PERSISTENCE_ENCODING_MISMATCH',
      `The root ${root} holds '${marker.compression}' logs but the backend was opened with compression '${compression}'; one root holds one encoding. Open it with compression: '${marker.compression}' or use another root.`,
      { details: { root, stored: marker.compression, requested: compression } },
    )
  }
  return marker.compression
}

function notARoot(root: string, why: string): JsonlPersistenceError {
  return new JsonlPersistenceError(
    'JSONL_PERSISTENCE_NOT_A_ROOT',
    `${root} is not a dsh session root (${why}); a read-only open never creates one. Point at an existing root, or open it writable to create one.`,
    { details: { root } },
  )
}

/** `readMarker` for a writable open: a marker that exists but cannot be read (a directory, no permission) is `JSONL_PERSISTENCE_UNSUPPORTED_ROOT`. */
function readMarkerOf(root: string, path: string): Marker | undefined {
  try {
    return readMarker(path)
  } catch (error) {
    throw new JsonlPersistenceError(
      'JSONL_PERSISTENCE_UNSUPPORTED_ROOT',
      `${path} cannot be read (${(error as Error).message}): ${root} is not a root this package can open. Restore the marker file (a regular file) or point the backend at another directory.`,
      { cause: error, details: { root, marker: path } },
    )
  }
}

function readMarker(path: string): Marker | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
    throw error
  }
  try {
    return JSON.parse(text) as Marker
  } catch {
    return { format: UNREADABLE, version: -1, compression: 'none' }
  }
}
