import { constants } from 'node:fs'
import { lstat, open, readdir, realpath } from 'node:fs/promises'
import { join, sep } from 'node:path'
import { AgentDefinitionError } from './errors.js'
import { invalidDefinition } from './parse.js'
import { MAX_DEFINITION_BYTES, MAX_DEFINITIONS_PER_DIRECTORY } from './schema.js'

const DEFINITION_FILE = /^[^.].*\.md$/

function errnoOf(error: unknown): string | undefined {
  return error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : undefined
}

function unreadable(path: string, why: string, cause?: unknown): AgentDefinitionError {
  return new AgentDefinitionError('AGENT_DEFINITION_UNREADABLE', `${path}: ${why}`, {
    details: { file: path, ...(errnoOf(cause) === undefined ? {} : { errno: errnoOf(cause) }) },
    ...(cause === undefined ? {} : { cause }),
  })
}

/**
 * The definition files of one directory: every `*.md` entry whose name does
 * not start with a dot, sorted by code point. A missing directory has none;
 * a directory with more than `MAX_DEFINITIONS_PER_DIRECTORY` is refused.
 */
export async function definitionFileNames(dir: string): Promise<string[]> {
  let names: string[]
  try {
    names = await readdir(dir)
  } catch (error) {
    if (errnoOf(error) === 'ENOENT') return []
    throw unreadable(dir, `cannot list the agent definitions directory (${errnoOf(error) ?? String(error)})`, error)
  }
  const files = names.filter((name) => DEFINITION_FILE.test(name)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  if (files.length > MAX_DEFINITIONS_PER_DIRECTORY) {
    throw unreadable(dir, `holds ${files.length} definition files, more than the ${MAX_DEFINITIONS_PER_DIRECTORY} read from one directory`)
  }
  return files
}

/**
 * The text of `<dir>/<fileName>`, or `undefined` when there is no such
 * entry. Only files under `dir` are read: a symbolic link is followed only
 * when its target resolves inside `dir`, and the file is opened without
 * following a link at its last component, so a link swapped in after the
 * check is refused rather than followed. At most `MAX_DEFINITION_BYTES` are
 * read, and the text must be UTF-8.
 */
export async function readDefinitionFile(dir: string, fileName: string): Promise<string | undefined> {
  const path = join(dir, fileName)
  let target = path
  try {
    const entry = await lstat(path)
    if (entry.isSymbolicLink()) {
      const [real, realDir] = await Promise.all([realpath(path), realpath(dir)])
      if (!real.startsWith(realDir + sep)) throw unreadable(path, 'is a symbolic link that resolves outside its agents directory')
      target = real
    }
  } catch (error) {
    if (error instanceof AgentDefinitionError) throw error
    if (errnoOf(error) === 'ENOENT' || errnoOf(error) === 'ENOTDIR') return undefined
    throw unreadable(path, `cannot read (${errnoOf(error) ?? String(error)})`, error)
  }
  let handle: Awaited<ReturnType<typeof open>> | undefined
  try {
    handle = await open(target, constants.O_RDONLY | constants.O_NOFOLLOW)
    const stat = await handle.stat()
    if (!stat.isFile()) throw unreadable(path, 'is not a regular file')
    if (stat.size > MAX_DEFINITION_BYTES) throw invalidDefinition(path, 1, `the file is larger than ${MAX_DEFINITION_BYTES} bytes`)
    const buffer = Buffer.alloc(Math.min(stat.size, MAX_DEFINITION_BYTES) + 1)
    const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0)
    if (bytesRead > MAX_DEFINITION_BYTES) throw invalidDefinition(path, 1, `the file is larger than ${MAX_DEFINITION_BYTES} bytes`)
    try {
      return new TextDecoder('utf-8', { fatal: true }).decode(buffer.subarray(0, bytesRead))
    } catch {
      throw invalidDefinition(path, 1, 'the file is not valid UTF-8 text')
    }
  } catch (error) {
    if (error instanceof AgentDefinitionError) throw error
    if (errnoOf(error) === 'ENOENT') return undefined
    if (errnoOf(error) === 'ELOOP') throw unreadable(path, 'became a symbolic link while it was read', error)
    if (errnoOf(error) === 'EISDIR') throw unreadable(path, 'is not a regular file', error)
    throw unreadable(path, `cannot read (${errnoOf(error) ?? String(error)})`, error)
  } finally {
    await handle?.close()
  }
}
