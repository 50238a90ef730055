import { mkdirSync, rmSync, symlinkSync } from 'node:fs'
import { join } from 'node:path'
import { isDshError } from '@dsh/context'
import { MARKER_FILE } from '@dsh/session-persistence-jsonl'
import { describe, expect, it } from 'vitest'
import { checkDerivedFiles, createHost, createQueryHost, rebuildIndex, verifyRoot } from '../src/index.js'
import { failureOf, scratchDir } from './support.js'

// A root whose persistence marker exists but cannot be read is not "a directory
// without a marker": the host's HOST_ROOT_INVALID keeps the real cause (the
// marker cannot be read, with the errno) and says what to do. EACCES needs an
// unprivileged user: tests/unprivileged-root.e2e.spec.ts.

/** Every function of the package that opens an existing root read-only. */
const OPENS: ReadonlyArray<readonly [string, (root: string) => unknown]> = [
  ['createHost read-only', (root) => createHost({ root, readOnly: true })],
  ['createHost requireExisting', (root) => createHost({ root, requireExisting: true })],
  ['createQueryHost read-only', (root) => createQueryHost({ root, readOnly: true })],
  ['verifyRoot', (root) => verifyRoot(root)],
  ['rebuildIndex', (root) => rebuildIndex({ root })],
  ['checkDerivedFiles', (root) => checkDerivedFiles(root)],
]

async function messagesOf(root: string): Promise<Array<readonly [string, string, unknown]>> {
  const found: Array<readonly [string, string, unknown]> = []
  for (const [name, open] of OPENS) {
    const error = await failureOf(() => open(root))
    expect(isDshError(error, 'HOST_ROOT_INVALID'), `${name}: expected HOST_ROOT_INVALID, got ${String(error)}`).toBe(true)
    found.push([name, (error as Error).message, (error as { details?: unknown }).details])
  }
  return found
}

/** A real root (written by a host), its marker replaced by `replace`. */
async function rootWithMarker(replace: (marker: string) => void): Promise<string> {
  const root = join(scratchDir('dsh-unreadable-marker-'), 'root')
  const host = await createHost({ root })
  await host.dispose()
  const marker = join(root, MARKER_FILE)
  rmSync(marker)
  replace(marker)
  return root
}

describe('a root whose persistence marker cannot be read', () => {
  it('a marker that is a directory (EISDIR) is HOST_ROOT_INVALID saying the marker cannot be read, not that there is none', async () => {
    const root = await rootWithMarker((marker) => mkdirSync(marker))
    for (const [name, message, details] of await messagesOf(root)) {
      expect(message, name).toBe(
        `The session root ${root} cannot be opened: its persistence marker ${MARKER_FILE} cannot be read (EISDIR). Check the owner and mode of the root (0700) and of its marker (a regular file, 0600), or run as their owner.`,
      )
      expect(details, name).toEqual({ root, marker: join(root, MARKER_FILE), code: 'EISDIR' })
    }
  })

  it('a marker that is a symbolic-link loop names ELOOP', async () => {
    const root = await rootWithMarker((marker) => symlinkSync(marker, marker))
    for (const [name, message] of await messagesOf(root)) {
      expect(message, name).toContain(`its persistence marker ${MARKER_FILE} cannot be read (ELOOP)`)
    }
  })

  it('a directory with no marker is still "not a dsh session root", with what the caller does instead', async () => {
    const root = scratchDir('dsh-unreadable-marker-')
    const messages = await messagesOf(root)
    for (const [name, message, details] of messages) {
      expect(message, name).toMatch(new RegExp(`^${root} is not a dsh session root \\(it has no persistence marker\\); `))
      expect(details, name).toEqual({ root })
    }
    expect(Object.fromEntries(messages.map(([name, message]) => [name, message.slice(message.indexOf(';') + 2)]))).toEqual({
      'createHost read-only': 'this host opens an existing root only and creates none. Point at an existing root.',
      'createHost requireExisting': 'this host opens an existing root only and creates none. Point at an existing root.',
      'createQueryHost read-only': 'this host opens an existing root only and creates none. Point at an existing root.',
      verifyRoot: 'verify reads existing roots only.',
      rebuildIndex: 'reindex works on existing roots only.',
      checkDerivedFiles: 'this host opens an existing root only and creates none. Point at an existing root.',
    })
  })
})
