import { mkdirSync, type Stats, statSync } from 'node:fs'
import { resolve } from 'node:path'
import { HostError } from './errors.js'

/**
 * The root of a host, checked before any backend touches it. Invariants:
 * a file is never taken for a root (a typed error, not a raw `ENOTDIR`), and a
 * read-only host never creates the root or anything in it.
 */
export function prepareRoot(root: string, readOnly: boolean): string {
  const path = resolve(root)
  const stats = statOrUndefined(path)
  if (stats !== undefined && !stats.isDirectory()) {
    throw new HostError(
      'HOST_ROOT_INVALID',
      `The session root ${path} is a file, not a directory; pass a directory (a new one is created).`,
      {
        details: { root: path },
      },
    )
  }
  if (stats === undefined) {
    if (readOnly) {
      throw new HostError(
        'HOST_ROOT_INVALID',
        `There is no session root at ${path}; a read-only host never creates one. Point at an existing root.`,
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
        `The session root ${path} cannot be created (${(error as NodeJS.ErrnoException).code ?? 'error'}); is a parent a file, or not writable?`,
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

function statOrUndefined(path: string): Stats | undefined {
  try {
    return statSync(path)
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOENT') return undefined
    if (code === 'ENOTDIR') {
      throw new HostError('HOST_ROOT_INVALID', `The session root ${path} lies under a file; pass a directory.`, {
        cause: error,
        details: { root: path },
      })
    }
    throw error
  }
}
