import { checkId, persistenceError } from '@dsh/session-persistence/backend'

/**
 * Session ids become directory names. The encoding keeps `[a-z0-9-]` as it
 * is and writes every other UTF-8 byte as `_xx` (lowercase hex), so:
 * - no name is empty, `.`/`..`, or contains `/`, `\`, NUL or a dot — no id can
 *   name a path outside its own directory;
 * - uppercase letters are escaped, so two ids never collide on a
 *   case-insensitive file system;
 * - the mapping is reversible (`decodeSessionDirName`).
 * An id whose encoding would exceed `MAX_DIRECT_NAME` characters (file names
 * are limited to 255 bytes) is stored under `=` + SHA-256 of its UTF-8 bytes
 * instead; `=` never appears in a direct encoding, so the two forms cannot
 * collide, and the full id is kept in the log's header line.
 */
export const MAX_DIRECT_NAME = 160

const DIRECT = /^[a-z0-9-]$/
const DIRECT_NAME = /^(?:[a-z0-9-]|_[0-9a-f]{2})+$/
const HASHED_NAME = /^=[0-9a-f]{64}$/

/** Throws `SESSION_PERSISTENCE_INVALID_ID` for ids that cannot be stored losslessly. */
export function assertStorableId(id: unknown): asserts id is string {
  if (typeof id !== 'string') {
    throw persistenceError('SESSION_PERSISTENCE_INVALID_ID', `A persisted session id must be a string, got ${typeof id}.`)
  }
  // An id the wire cannot name is never stored, nor looked for: among them the empty id, and a lone surrogate,
  // which has no UTF-8 form (two different ids would share one directory).
  checkId(id)
}

/** The directory name of `id` (validated first). */
export function encodeSessionDirName(id: string): string {
  assertStorableId(id)
  let out = ''
  for (const char of id) {
    if (DIRECT.test(char)) {
      out += char
    } else {
      for (const byte of Buffer.from(char, 'utf8')) out += `_${byte.toString(16).padStart(2, '0')}`
    }
    if (out.length > MAX_DIRECT_NAME)
      return `=${process.getBuiltinModule('node:crypto').createHash('sha256').update(id, 'utf8').digest('hex')}`
  }
  return out
}

/**
 * The id a directory name stands for: a string for a direct encoding,
 * `{ hashed: true }` for a hashed one (its id is in the log header), or
 * `undefined` when the name is not a session directory at all.
 */
export function decodeSessionDirName(name: string): string | { readonly hashed: true } | undefined {
  if (HASHED_NAME.test(name)) return { hashed: true }
  if (!DIRECT_NAME.test(name) || name.length > MAX_DIRECT_NAME) return undefined
  const bytes: number[] = []
  for (let i = 0; i < name.length; ) {
    if (name[i] === '_') {
      bytes.push(parseInt(name.slice(i + 1, i + 3), 16))
      i += 3
    } else {
      bytes.push(name.charCodeAt(i))
      i += 1
    }
  }
  const id = new TextDecoder('utf-8', { fatal: false }).decode(Uint8Array.from(bytes))
  // Only canonical names decode: escaping a direct character, or invalid
  // UTF-8, gives a name no id encodes to.
  return id.length > 0 && encodeSessionDirName(id) === name ? id : undefined
}

/** True when `name` is a (direct or hashed) session directory name. */
export function isSessionDirName(name: string): boolean {
  return decodeSessionDirName(name) !== undefined
}
