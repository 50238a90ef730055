import { join } from 'node:path'
import { ImportV0Error } from './errors.js'

/**
 * The v0 root layout: `<root>/--<projectKey(cwd)>--/<encodeSegment(id)>/session.jsonl.zstd`
 * (or `session.jsonl`), sessions without a cwd under `_no-cwd/`.
 *
 * Invariants: `encodeSegment` is injective over every UTF-16 string (lone
 * surrogates included) and its output is one safe path segment of at most
 * `SEGMENT_MAX_BYTES` (an id whose encoding is longer is refused); `projectKey`
 * is deliberately lossy (separator runs collapse, long keys are cut) — it
 * groups sessions for people, the header's `cwd` stays the truth.
 */

export const NO_CWD_DIR = '_no-cwd'
export const ZSTD_LOG = 'session.jsonl.zstd'
export const PLAIN_LOG = 'session.jsonl'
export type V0Compression = 'zstd' | 'none'

const SAFE = /^[A-Za-z0-9._-]$/

function escapeUnit(code: number): string {
  return `~${code.toString(16).toUpperCase().padStart(4, '0')}`
}

/**
 * Bytes one path segment may hold (`NAME_MAX` on Linux and macOS). Every
 * segment the layout makes is ASCII, so its length is its size: a project
 * key is cut to fit; a session directory name is the whole id encoded, and
 * one that does not fit is refused.
 */
export const SEGMENT_MAX_BYTES = 255

/**
 * Keeps `[A-Za-z0-9._-]`, writes every other code unit (`~` included) as `~XXXX`; `.` and `..` are escaped whole.
 * Throws `IMPORT_V0_INVALID_ID` for an empty id and for one whose encoding is over `SEGMENT_MAX_BYTES`
 * (no file system can hold that directory: 256 ASCII characters, 52 others).
 */
export function encodeSegment(raw: string): string {
  if (raw.length === 0) throw new ImportV0Error('IMPORT_V0_INVALID_ID', 'An empty session id cannot name a v0 session directory.')
  if (raw === '.') return '~002E'
  if (raw === '..') return '~002E~002E'
  let out = ''
  for (let i = 0; i < raw.length; i++) {
    const ch = raw[i] as string
    out += SAFE.test(ch) ? ch : escapeUnit(raw.charCodeAt(i))
    // Stops early: an id may be far longer than any directory name.
    if (out.length > SEGMENT_MAX_BYTES) throw idTooLong(raw)
  }
  return out
}

function idTooLong(id: string): ImportV0Error {
  let bytes = 0
  for (let i = 0; i < id.length; i++) bytes += SAFE.test(id[i] as string) ? 1 : 5
  return new ImportV0Error(
    'IMPORT_V0_INVALID_ID',
    `Session ${JSON.stringify(id.length > 80 ? `${id.slice(0, 80)}…` : id)} (${id.length} characters) cannot be named in the v0 layout: its directory name would be ${bytes} bytes (each character outside [A-Za-z0-9._-] takes 5), over the ${SEGMENT_MAX_BYTES} bytes a path segment may hold. Leave it out of the export; dsh's own formats keep it.`,
    { details: { id, bytes, max: SEGMENT_MAX_BYTES, reason: 'too-long' } },
  )
}

/** The inverse of `encodeSegment`; `undefined` for a name `encodeSegment` never produces. */
export function decodeSegment(segment: string): string | undefined {
  let out = ''
  for (let i = 0; i < segment.length; ) {
    const ch = segment[i] as string
    if (ch === '~') {
      const hex = segment.slice(i + 1, i + 5)
      if (!/^[0-9A-F]{4}$/.test(hex)) return undefined
      out += String.fromCharCode(Number.parseInt(hex, 16))
      i += 5
    } else if (SAFE.test(ch)) {
      out += ch
      i += 1
    } else {
      return undefined
    }
  }
  return out.length > 0 && encodeSegment(out) === segment ? out : undefined
}

/** Each run of `/`, `\` or `:` becomes one `-`, other unsafe units `~XXXX`; leading dashes go, an empty key is `root`, at most 251 characters. */
export function projectKey(cwd: string): string {
  if (cwd.length === 0) throw new ImportV0Error('IMPORT_V0_INVALID_ID', 'An empty cwd cannot name a v0 project directory.')
  let readable = ''
  let inSeparatorRun = false
  for (let i = 0; i < cwd.length; i++) {
    const ch = cwd[i] as string
    if (ch === '/' || ch === '\\' || ch === ':') {
      if (!inSeparatorRun) readable += '-'
      inSeparatorRun = true
      continue
    }
    inSeparatorRun = false
    readable += SAFE.test(ch) ? ch : escapeUnit(cwd.charCodeAt(i))
  }
  const slug = readable.replace(/^-+/, '') || 'root'
  return `--${slug.slice(0, 251)}--`
}

/** The project directory name of a session: `--<key>--` or `_no-cwd`. */
export function projectDirName(cwd: string | undefined): string {
  return cwd === undefined ? NO_CWD_DIR : projectKey(cwd)
}

/** The log file of a session in a v0 root. */
export function v0LogPath(root: string, id: string, cwd: string | undefined, compression: V0Compression): string {
  return join(root, projectDirName(cwd), encodeSegment(id), compression === 'zstd' ? ZSTD_LOG : PLAIN_LOG)
}
