import {
  closeSync,
  fstatSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  readSync,
  rmSync,
  statSync,
  writeFileSync,
  writeSync,
} from 'node:fs'
import { basename, dirname, join, resolve } from 'node:path'
import type { Logger } from '@dsh/context'
import { createHost, derivedPaths } from '@dsh/host'
import { SessionId } from '@dsh/session'
import { createJsonlPersistence, TRAILER_MAGIC } from '@dsh/session-persistence-jsonl'
import { CliError } from '../errors.js'
import { DEMO_IDS } from './ids.js'
import type { DemoPlace } from './place.js'

const MARKER = '.dsh-demo-root'
const DEMO_SESSION_IDS: readonly string[] = Object.values(DEMO_IDS)

/** The demo in a local session root: JSONL+zstd logs, the SQLite index and cache beside them. */
export function fileDemoPlace(rootDir: string, logger?: Logger): DemoPlace {
  const root = resolve(rootDir)
  return {
    location: root,
    prepare: async () => {
      if (await prepareRoot(root, logger)) dropDerived(root, true)
    },
    hostOptions: () => ({ root }),
    worker: () => ({ args: ['root', root], env: {} }),
    // The kernel closes a killed process's file locks at once.
    afterCrash: async () => {},
    corrupt: async (id) => corruptCommittedBatch(root, id),
    dropCache: async () => dropDerived(root, false),
    close: async () => {},
  }
}

/**
 * Readies the root for the scenario; true when it is one an earlier demo
 * made. A new or empty directory becomes a demo root (the marker). A
 * non-empty directory without the marker is refused (`CLI_ROOT_INVALID`).
 * In a demo root, as in a demo store (store-place.ts), the demo deletes only
 * its own sessions, and refuses, changing nothing, while the root holds any
 * other session (`CLI_STORE_NOT_EMPTY`): a user may have run or imported
 * sessions into it. Other files in it are left as they are.
 */
async function prepareRoot(root: string, logger: Logger | undefined): Promise<boolean> {
  let isDirectory: boolean | undefined
  try {
    isDirectory = statSync(root).isDirectory()
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code
    if (code === 'ENOTDIR') throw new CliError('CLI_ROOT_INVALID', `${root} lies under a file; pass --root with a new directory.`)
    if (code !== 'ENOENT') throw error
  }
  if (isDirectory === false) throw new CliError('CLI_ROOT_INVALID', `${root} is a file, not a directory; pass --root with a new directory.`)
  if (isDirectory === true) {
    const entries = readdirSync(root)
    if (entries.includes(MARKER)) {
      await deleteDemoSessions(root, logger)
      writeFileSync(join(root, MARKER), MARKER_TEXT, { mode: 0o600 })
      return true
    }
    if (entries.length > 0) {
      throw new CliError('CLI_ROOT_INVALID', `${root} is not empty and was not made by 'dsh demo'; pass --root with a new directory.`)
    }
  }
  mkdirSync(root, { recursive: true, mode: 0o700 })
  writeFileSync(join(root, MARKER), MARKER_TEXT, { mode: 0o600 })
  return false
}

const MARKER_TEXT =
  "made by dsh demo; a rerun replaces the demo's own sessions (release-1.4…) and refuses while this root holds any other session\n"

/** The demo's own sessions, deleted through a writable host; refused while any other session is here. */
async function deleteDemoSessions(root: string, logger: Logger | undefined): Promise<void> {
  const host = await createHost({ root, ...(logger === undefined ? {} : { logger }) })
  try {
    const foreign = (await host.persistence.list()).map((h) => h.header.id as string).filter((id) => !DEMO_SESSION_IDS.includes(id))
    if (foreign.length > 0) {
      throw new CliError(
        'CLI_STORE_NOT_EMPTY',
        `${root} holds ${foreign.length} session(s) the demo did not make (for example '${foreign[0]}'); the demo deletes only its own, so nothing was changed. Pass --root with a new directory.`,
      )
    }
    // Children before parents (a fork references its source's prefix).
    for (const id of [...DEMO_SESSION_IDS].reverse()) await host.persistence.delete(SessionId(id), { materializeDependants: true })
  } finally {
    await host.dispose()
  }
}

/**
 * Deletes the projection cache, and with `index` the query index too (the
 * file its path links to included): derived data that only costs a rebuild.
 * A rerun starts without either, as on a new root, so the listings it
 * prints are those of the scenario alone.
 */
function dropDerived(root: string, index: boolean): void {
  const paths = derivedPaths(root)
  const files = [paths.projectionCache]
  if (index) {
    try {
      // The index path links to its current generation beside it; a link leading anywhere else is only unlinked.
      if (lstatSync(paths.index).isSymbolicLink()) {
        const generation = resolve(dirname(paths.index), readlinkSync(paths.index))
        const prefix = `${basename(paths.index).replace(/\.sqlite$/, '')}-`
        if (dirname(generation) === dirname(paths.index) && basename(generation).startsWith(prefix)) files.push(generation)
      }
    } catch {
      // No index: nothing to delete.
    }
    files.push(paths.index)
  }
  for (const file of files) for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true })
}

/** Flips one byte inside the last committed data frame of `id`'s log (a real byte flip, as a disk would). */
function corruptCommittedBatch(root: string, id: string): string {
  const persistence = createJsonlPersistence({ root, readOnly: true })
  const file = persistence.logPath(id)
  void persistence.close()
  const fd = openSync(file, 'r+')
  try {
    const bytes = Buffer.alloc(fstatSync(fd).size)
    readSync(fd, bytes, 0, bytes.length, 0)
    // Each batch is a data frame followed by its skippable trailer frame; the
    // last trailer starts at the last occurrence of the trailer magic, so a
    // few bytes before it lie inside the committed data frame it vouches for.
    const magic = Buffer.alloc(4)
    magic.writeUInt32LE(TRAILER_MAGIC)
    const trailerStart = bytes.lastIndexOf(magic)
    if (trailerStart < 16) throw new Error(`The demo could not find a committed batch in ${file}.`)
    const at = trailerStart - 6
    const byte = Buffer.from([bytes[at]! ^ 0x5a])
    writeSync(fd, byte, 0, 1, at)
  } finally {
    closeSync(fd)
  }
  return file
}
