import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import type { JsonlCompression } from './codec.js'
import { JsonlPersistenceError } from './errors.js'
import { isErrno, tempSibling } from './fs-io.js'

/** The file at a root that records its format and encoding (its name has a dot, so it never looks like a session directory). */
export const MARKER_FILE = 'dsh-persistence.json'
const FORMAT = 'dsh-session-persistence-jsonl'
const VERSION = 1

interface Marker {
  readonly format: string
  readonly version: number
  readonly compression: JsonlCompression
}

/**
 * Creates the root and its marker if needed, and checks that an existing
 * root uses `compression`: one root holds one encoding. Synchronous because
 * it runs once, when the backend is created.
 */
export function openRoot(root: string, compression: JsonlCompression): void {
  const created = mkdirSync(root, { recursive: true })
  if (created !== undefined) fsyncDirSync(dirname(created))
  const path = join(root, MARKER_FILE)
  let marker = readMarker(path)
  if (marker === undefined) {
    const temp = tempSibling(path)
    writeFileSync(temp, JSON.stringify({ format: FORMAT, version: VERSION, compression } satisfies Marker) + '\n', { flag: 'wx' })
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
    marker = readMarker(path)
  }
  if (marker === undefined || marker.format !== FORMAT || marker.version !== VERSION || (marker.compression !== 'zstd' && marker.compression !== 'none')) {
    throw new JsonlPersistenceError('JSONL_PERSISTENCE_UNSUPPORTED_ROOT', `${path} does not describe a ${FORMAT} root of version ${VERSION}; point the backend at another directory or upgrade @dsh/session-persistence-jsonl.`, { details: { root } })
  }
  if (marker.compression !== compression) {
    throw new JsonlPersistenceError('JSONL_PERSISTENCE_ENCODING_MISMATCH', `The root ${root} holds '${marker.compression}' logs but the backend was opened with compression '${compression}'; one root holds one encoding. Open it with compression: '${marker.compression}' or use another root.`, { details: { root, stored: marker.compression, requested: compression } })
  }
}

function readMarker(path: string): Marker | undefined {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined
    throw error
  }
  try {
    return JSON.parse(text) as Marker
  } catch {
    return { format: 'unreadable', version: -1, compression: 'none' }
  }
}

function fsyncDirSync(dir: string): void {
  const fd = openSync(dir, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}
