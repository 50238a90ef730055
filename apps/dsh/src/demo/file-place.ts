import { closeSync, fstatSync, mkdirSync, openSync, readdirSync, readSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { derivedPaths } from '@dsh/host'
import { createJsonlPersistence, TRAILER_MAGIC } from '@dsh/session-persistence-jsonl'
import { CliError } from '../errors.js'
import type { DemoPlace } from './place.js'

const MARKER = '.dsh-demo-root'

/** The demo in a local session root: JSONL+zstd logs, the SQLite index and cache beside them. */
export function fileDemoPlace(rootDir: string): DemoPlace {
  const root = resolve(rootDir)
  return {
    location: root,
    prepare: async () => prepareRoot(root),
    hostOptions: () => ({ root }),
    worker: () => ({ args: ['root', root], env: {} }),
    // The kernel closes a killed process's file locks at once.
    afterCrash: async () => {},
    corrupt: async (id) => corruptCommittedBatch(root, id),
    dropCache: async () => {
      const cache = derivedPaths(root).projectionCache
      for (const file of [cache, `${cache}-wal`, `${cache}-shm`]) rmSync(file, { force: true })
    },
    close: async () => {},
  }
}

/** A demo root is wiped only when it is one the demo made; anything else non-empty is refused. */
function prepareRoot(root: string): void {
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
    if (entries.length > 0 && !entries.includes(MARKER)) {
      throw new CliError('CLI_ROOT_INVALID', `${root} is not empty and was not made by 'dsh demo'; pass --root with a new directory.`)
    }
    rmSync(root, { recursive: true, force: true })
  }
  mkdirSync(root, { recursive: true, mode: 0o700 })
  writeFileSync(join(root, MARKER), 'made by dsh demo; the demo wipes and rebuilds this directory\n', { mode: 0o600 })
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
