import { closeSync, constants, mkdirSync, openSync, readSync, type Stats, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { escapeTerminal, isDshError } from '@dsh/context'
import { MARKER_FILE } from '@dsh/session-persistence-jsonl'
import { HostError } from './errors.js'

/**
 * The root of a host, checked before any backend touches it. Invariants:
 * a file is never taken for a root, a path that cannot be inspected (`EACCES`,
 * `ELOOP`, `ENAMETOOLONG`…) is a typed error naming the errno, never a raw
 * Node error, and a read-only host never creates the root or anything in it.
 */
export function prepareRoot(root: string, readOnly: boolean): string {
  const path = resolve(root)
  const stats = statOrUndefined(path)
  if (stats !== undefined && !stats.isDirectory()) {
    throw new HostError(
      'HOST_ROOT_INVALID',
      `The session root ${shownRoot(path)} is a file, not a directory; pass a directory (a new one is created).`,
      {
        details: { root: path },
      },
    )
  }
  if (stats === undefined) {
    if (readOnly) {
      throw new HostError(
        'HOST_ROOT_INVALID',
        `There is no session root at ${shownRoot(path)}; this host opens an existing root only and creates none. Point at an existing root.`,
        {
          details: { root: path },
        },
      )
    }
    try {
      mkdirSync(path, { recursive: true, mode: 0o700 })
    } catch (error) {
      throw new HostError(
        'HOST_ROOT_INVALID',
        `The session root ${shownRoot(path)} cannot be created (${(error as NodeJS.ErrnoException).code ?? 'error'}); is a parent a file, or not writable?`,
        {
          cause: error,
          details: { root: path },
        },
      )
    }
  }
  return path
}

/**
 * Session data is private: a root should be 0700. Returns a warning a person
 * can act on when group or others may read or enter `root`, else `undefined`.
 * The root's own mode is the whole check: every file dsh keeps — logs,
 * marker, locks, the derived `.dsh/` directory (index, cache) — is reached
 * only through the root, so a root no one else may enter keeps them all
 * private, and any group/other bit on it (even enter-only 0711, which lets
 * others open files by name) is warned about. `serve`'s token file is checked
 * on its own (refused unless 0600).
 */
export function rootPermissionWarning(root: string): string | undefined {
  const stats = statOrUndefined(resolve(root))
  if (stats === undefined || (stats.mode & 0o077) === 0) return undefined
  const mode = (stats.mode & 0o777).toString(8).padStart(3, '0')
  return `the session root ${resolve(root)} is readable by other users (mode ${mode}); every transcript in it is too. Run: chmod 700 '${resolve(root)}'`
}

/**
 * How much of a root's path a message shows (UTF-16 code units, before
 * escaping): a path may be as long as a caller can type, and a message that
 * names it must stay readable. `details.root` keeps the whole path.
 */
const ROOT_SHOWN_MAX = 256

/** A root's path as messages show it: escaped for a terminal, cut (`…`) past {@link ROOT_SHOWN_MAX}. */
export function shownRoot(path: string): string {
  return escapeTerminal(path, { max: ROOT_SHOWN_MAX })
}

/**
 * The root's stats, or `undefined` when nothing is there. Any other failure
 * to stat it (under a file, no permission on the path, a symbolic-link loop,
 * a path too long) is the caller's root to change, so it is
 * `HOST_ROOT_INVALID` naming the path and the errno, never a raw Node error.
 */
function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    if (code === 'ENOENT') return undefined
    throw new HostError('HOST_ROOT_INVALID', uninspectable(path, code), {
      cause: error,
      details: { root: path, code },
    })
  }
}

/** What a root that cannot be stat'ed with `code` is, and what to do about it. */
function uninspectable(path: string, code: string): string {
  const shown = shownRoot(path)
  if (code === 'ENOTDIR') return `The session root ${shown} lies under a file; pass a directory.`
  const head = `The session root ${shown} cannot be inspected (${code})`
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return `${head}: this user may not enter a directory on its path. Run as a user who may, or pass a root this user can use.`
    case 'ELOOP':
      return `${head}: its path runs into a symbolic-link loop (or too many links). Fix the links, or pass another directory.`
    case 'ENAMETOOLONG':
      return `${head}: the path, or a name in it, is longer than the system allows. Pass a shorter path.`
    default:
      return `${head}. Check the path and its permissions, or pass another directory.`
  }
}

/**
 * `error` as the host reports it. The JSONL backend's read-only open of a
 * directory that is not a dsh root (`JSONL_PERSISTENCE_NOT_A_ROOT`) becomes
 * `HOST_ROOT_INVALID` with its real cause: no persistence marker (`remedy`
 * says what the caller works on instead), or a marker that exists but cannot
 * be read, named with its errno (no permission, a directory, a link loop) —
 * that root is a dsh root this process may not read, not "no root". Any
 * other error is returned as it is.
 */
export function rootErrorOf(error: unknown, root: string, remedy: string): unknown {
  if (!isDshError(error, 'JSONL_PERSISTENCE_NOT_A_ROOT')) return error
  const marker = join(root, MARKER_FILE)
  const read = markerRead(marker)
  if (read === 'absent') {
    return new HostError('HOST_ROOT_INVALID', `${shownRoot(root)} is not a dsh session root (it has no persistence marker); ${remedy}`, {
      cause: error,
      details: { root },
    })
  }
  if (read === 'readable') {
    // The marker reads now, so what failed is in the backend's own words.
    return new HostError('HOST_ROOT_INVALID', error.message, { cause: error, details: { root, marker } })
  }
  return new HostError(
    'HOST_ROOT_INVALID',
    `The session root ${shownRoot(root)} cannot be opened: its persistence marker ${MARKER_FILE} cannot be read (${read}). Check the owner and mode of the root (0700) and of its marker (a regular file, 0600), or run as their owner.`,
    { cause: error, details: { root, marker, code: read } },
  )
}

/**
 * Whether the marker can be read: `absent` when there is none (`ENOENT`,
 * `ENOTDIR`), the errno when opening it or reading its first byte fails (as
 * the backend's read of it did), else `readable`. Opened non-blocking, so a
 * FIFO in its place never holds the caller.
 */
function markerRead(marker: string): 'absent' | 'readable' | string {
  let fd: number | undefined
  try {
    fd = openSync(marker, constants.O_RDONLY | constants.O_NONBLOCK)
    readSync(fd, Buffer.alloc(1), 0, 1, 0)
    return 'readable'
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    return code === 'ENOENT' || code === 'ENOTDIR' ? 'absent' : code
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}
