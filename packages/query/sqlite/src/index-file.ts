import {
  closeSync,
  existsSync,
  fsyncSync,
  lstatSync,
  openSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
} from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { abandonedBuild } from './schema.js'

// Where an index lives on disk. The path a root names (`<root>/.dsh/index.sqlite`)
// is a pointer: a symbolic link to one generation file beside it
// (`index-<generation>.sqlite`). A rebuild writes a new generation and renames
// a new link over the path, one atomic step; readers and writers holding the
// old generation keep reading it until they notice (`identify` at the start of
// each operation) and reopen. A generation keeps its own WAL companions
// (`index-<generation>.sqlite-wal`, `-shm`): SQLite names them after the file
// it opened, so a connection to one generation never finds another's WAL. A
// plain file at the path (written by hand or by another tool) is used in
// place; the first rebuild replaces it with a link. A build killed before it
// published its generation leaves the file behind; the next writer removes it
// (`removeLeftovers`).

/** Which file an index path stands for right now, and its identity (device and inode). */
export interface IndexFile {
  /** The database file: the link's target, or the path itself when it is a plain file. */
  readonly file: string
  /** `<dev>:<ino>` of `file`: changes when a rebuild swaps a new generation in. */
  readonly identity: string
}

/**
 * Resolves the index path: `undefined` when there is no index (no path, or
 * a link to a missing generation). Throws only for what is not a missing
 * file (EACCES, EIO): the caller reports it as an unavailable index.
 */
export function identify(path: string): IndexFile | undefined {
  let file = path
  try {
    // Only a file beside the link is followed: the index never leaves its directory.
    if (lstatSync(path).isSymbolicLink()) file = join(dirname(path), basename(readlinkSync(path)))
    const stats = statSync(file)
    return { file, identity: `${stats.dev}:${stats.ino}` }
  } catch (error) {
    if (isMissing(error)) return undefined
    throw error
  }
}

/** A new generation's file name beside `path` (not yet created). */
export function newGeneration(path: string): string {
  return join(dirname(path), `${generationPrefix(path)}${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}.sqlite`)
}

/**
 * Makes `file` (a complete generation beside `path`) the index: a new link
 * is created under a temporary name and renamed over `path`, so a reader
 * opening the path finds either the old index or the new one, never none.
 * The caller has synced the file (through a descriptor it holds: closing
 * another one here would drop the build's lock on it); the directory is
 * synced after, so the swap survives a crash. Returns the file the path
 * named before, if it was a generation (the caller removes it: readers that
 * still hold it keep their descriptor).
 */
export function publish(path: string, file: string): string | undefined {
  const before = previousGeneration(path)
  const link = `${path}.${process.pid}-${Math.random().toString(36).slice(2, 8)}.link`
  symlinkSync(basename(file), link)
  try {
    renameSync(link, path)
  } catch (error) {
    rmSync(link, { force: true })
    throw error
  }
  syncFile(dirname(path))
  return before === file ? undefined : before
}

/** Removes a database file and its companions (`-wal`, `-shm`, `-journal`), as far as they exist. */
export function removeDatabase(file: string): void {
  for (const suffix of ['-wal', '-shm', '-journal', '']) rmSync(file + suffix, { force: true })
}

/**
 * Removes WAL companions (`-wal`, `-shm`, `-journal`) of generations that
 * are gone: a replaced generation still held by a reader keeps them after
 * its file is removed, and nothing else would. Companions of an existing
 * file are left alone.
 */
export function sweepCompanions(path: string): void {
  const { dir, names } = generationNames(path)
  for (const name of names) {
    const companion = /^(.*\.sqlite)-(wal|shm|journal)$/.exec(name)
    if (companion === null) continue
    if (!existsSync(join(dir, companion[1]!))) rmSync(join(dir, name), { force: true })
  }
}

/**
 * Removes what builds killed before publishing left beside `path`: each
 * generation file the path does not name that `abandonedBuild` finds
 * abandoned (still marked as being built, and held by no connection: a build
 * running now, in this process or another, holds its file until it is
 * published). The path is read again after that check, so a build that
 * published the file meanwhile keeps it. Then the companions of files that
 * are gone (`sweepCompanions`). Only a writer calls this; a file still empty
 * (a build killed before its first write) is left: it takes no room, and
 * nothing tells it from a build about to begin.
 */
export function removeLeftovers(path: string): void {
  const current = identify(path)?.file
  for (const file of generationFiles(path)) {
    if (file !== current && abandonedBuild(file) && identify(path)?.file !== file) rmSync(file, { force: true })
  }
  sweepCompanions(path)
}

/** The regular files beside `path` named as its generations (`newGeneration`). */
function generationFiles(path: string): string[] {
  const { dir, prefix, names } = generationNames(path)
  return names
    .filter((name) => /^[0-9a-z]+\.sqlite$/.test(name.slice(prefix.length)))
    .map((name) => join(dir, name))
    .filter((file) => {
      try {
        return lstatSync(file).isFile()
      } catch {
        return false
      }
    })
}

/** What every generation file's name beside `path` begins with (`<name>-`). */
function generationPrefix(path: string): string {
  return `${basename(path).replace(/\.sqlite$/, '')}-`
}

/** The names beside `path` that begin with its generations' prefix (none when the directory cannot be read). */
function generationNames(path: string): { dir: string; prefix: string; names: string[] } {
  const dir = dirname(path)
  const prefix = generationPrefix(path)
  try {
    return { dir, prefix, names: readdirSync(dir).filter((name) => name.startsWith(prefix)) }
  } catch {
    return { dir, prefix, names: [] }
  }
}

/** The generation the link at `path` names, if it is one of ours (a plain file is not: the rename replaces it). */
function previousGeneration(path: string): string | undefined {
  try {
    return lstatSync(path).isSymbolicLink() ? join(dirname(path), basename(readlinkSync(path))) : undefined
  } catch {
    return undefined
  }
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r')
  try {
    fsyncSync(fd)
  } finally {
    closeSync(fd)
  }
}

function isMissing(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code
  return code === 'ENOENT' || code === 'ENOTDIR'
}
