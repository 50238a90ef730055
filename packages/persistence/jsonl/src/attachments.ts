import { constants, promises as fsp, lstatSync, mkdirSync } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { join } from 'node:path'
import type { AttachmentRef } from '@dsh/session'
import type { AttachmentPutOptions } from '@dsh/session-persistence'
import {
  attachmentNotFound,
  checkAttachment,
  checkAttachmentSession,
  checkDigest,
  digestMatches,
  persistenceError,
} from '@dsh/session-persistence/backend'
import { ioError, labelOf } from './errors.js'
import { MAX_FORK_DEPTH } from './fork-prefix.js'
import { fsyncDir, isErrno, tempSibling, writeAt } from './fs-io.js'
import { assertStorableId, encodeSessionDirName } from './id-encoding.js'
import type { LogContext } from './log-context.js'

/**
 * Attachments as private files beside the session's log:
 * `<session dir>/attachments/<sha256>` (directories 0700, files 0600).
 *
 * Invariants: a file is published whole — written to a temporary sibling,
 * fsynced, renamed into place, its directory fsynced — so a name always
 * holds the bytes its digest names (every read checks them again). A fork
 * stored by reference reads its source's files through the reference (the
 * source chain of its log header), never a copy; the source cannot be
 * deleted while the fork references it (`SESSION_PERSISTENCE_REFERENCED`,
 * the rule of forks), and `materializeDependants` hard-links the source's
 * files into the fork before the source goes. Deleting a session removes
 * its directory of attachments with it. Nothing is written outside the
 * session's directory, and a symbolic link is never followed.
 */
export const ATTACHMENTS_DIR = 'attachments'

export class AttachmentFiles {
  readonly #ctx: LogContext
  readonly #maxBytes: number

  constructor(ctx: LogContext, maxBytes: number) {
    this.#ctx = ctx
    this.#maxBytes = maxBytes
  }

  /** Stores the bytes (once: an existing file of the digest is kept) and returns their reference. */
  async put(id: string, bytes: Uint8Array, options: AttachmentPutOptions): Promise<AttachmentRef> {
    const checked = checkAttachment(id, bytes, options, this.#maxBytes)
    const { root, reader } = this.#ctx
    const dir = join(root, encodeSessionDirName(id))
    await reader.assertSessionDir(dir)
    if (makeDir(dir)) await fsyncDir(root)
    const files = join(dir, ATTACHMENTS_DIR)
    if (makeDir(files)) await fsyncDir(dir)
    const file = join(files, checked.digest)
    if (existingSize(file) === checked.bytes.length) return Object.freeze(checked.ref)
    const temp = tempSibling(file)
    try {
      const handle = await fsp.open(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600)
      try {
        await writeAt(handle, checked.bytes, 0)
        await handle.sync()
      } finally {
        await handle.close()
      }
      await fsp.rename(temp, file)
      await fsyncDir(files)
    } catch (error) {
      await fsp.unlink(temp).catch(() => {})
      throw ioError(`store an attachment of session ${labelOf(id)}`, error)
    }
    return Object.freeze(checked.ref)
  }

  /** The bytes of `digest` from the session's files, else from its fork source's (up the chain). */
  async read(id: string, digest: string): Promise<Uint8Array> {
    checkDigest(id, digest)
    const { root, reader, metrics } = this.#ctx
    let holder = id
    for (let depth = 0; depth <= MAX_FORK_DEPTH; depth++) {
      const dir = join(root, encodeSessionDirName(holder))
      await reader.assertSessionDir(dir)
      const file = join(dir, ATTACHMENTS_DIR, digest)
      const bytes = await readPrivate(file)
      if (bytes !== undefined) {
        metrics.bytesRead += bytes.length
        if (!digestMatches(bytes, digest)) throw damaged(file, 'its bytes do not hash to its name')
        return bytes
      }
      const source = (await reader.readPhysicalAt(reader.logPath(holder)))?.fork?.source
      if (source === undefined) break
      holder = source
    }
    throw attachmentNotFound(id, digest)
  }

  /**
   * Gives fork `childId` its own link to every attachment file of the
   * sessions it reads them from (its source, and theirs): before a
   * materialized fork stops referencing its source. No bytes are copied
   * unless the file system refuses a hard link.
   */
  async inherit(childId: string, sourceId: string): Promise<void> {
    const { root, reader } = this.#ctx
    const files = join(root, encodeSessionDirName(childId), ATTACHMENTS_DIR)
    let made = false
    let holder: string | undefined = sourceId
    for (let depth = 0; holder !== undefined && depth <= MAX_FORK_DEPTH; depth++) {
      const from = join(root, encodeSessionDirName(holder), ATTACHMENTS_DIR)
      for (const name of await digestNames(from)) {
        if (!made) {
          makeDir(files)
          made = true
        }
        try {
          await fsp.link(join(from, name), join(files, name))
        } catch (error) {
          if (isErrno(error, 'EEXIST')) continue
          if (!isErrno(error, 'EXDEV', 'EPERM', 'EMLINK')) throw ioError(`link an attachment into fork ${labelOf(childId)}`, error)
          await fsp.copyFile(join(from, name), join(files, name), constants.COPYFILE_EXCL)
        }
      }
      holder = (await reader.readPhysicalAt(reader.logPath(holder)))?.fork?.source
    }
    if (made) await fsyncDir(files)
  }
}

/** Removes a session's attachment files (on delete, once nothing references the session). */
export async function removeAttachments(dir: string): Promise<void> {
  await fsp.rm(join(dir, ATTACHMENTS_DIR), { recursive: true, force: true }).catch((error: unknown) => {
    throw ioError(`remove the attachments in ${dir}`, error)
  })
}

/** The session of an attachment call, as this backend stores ids. */
export function checkAttachmentId(id: unknown): asserts id is string {
  assertStorableId(id)
  checkAttachmentSession(id)
}

/** Makes a private directory; false when it exists (as a directory: anything else is refused, never followed). */
function makeDir(dir: string): boolean {
  try {
    mkdirSync(dir, { mode: 0o700 })
    return true
  } catch (error) {
    if (!isErrno(error, 'EEXIST')) throw ioError(`create ${dir}`, error)
  }
  if (!lstatSync(dir).isDirectory()) throw damaged(dir, 'it is not a directory (a symbolic link or a file), and is never followed')
  return false
}

function existingSize(file: string): number | undefined {
  try {
    const stats = lstatSync(file)
    return stats.isFile() ? stats.size : undefined
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return undefined
    throw ioError(`examine ${file}`, error)
  }
}

/** A stored file's bytes, never through a symbolic link; `undefined` when absent. */
async function readPrivate(file: string): Promise<Buffer | undefined> {
  let handle: FileHandle
  try {
    handle = await fsp.open(file, constants.O_RDONLY | constants.O_NOFOLLOW)
  } catch (error) {
    if (isErrno(error, 'ENOENT', 'ENOTDIR')) return undefined
    if (isErrno(error, 'ELOOP')) throw damaged(file, 'it is a symbolic link, and is never followed')
    throw ioError(`open ${file}`, error)
  }
  try {
    return await handle.readFile()
  } catch (error) {
    throw ioError(`read ${file}`, error)
  } finally {
    await handle.close()
  }
}

async function digestNames(dir: string): Promise<string[]> {
  try {
    return (await fsp.readdir(dir)).filter((name) => /^[0-9a-f]{64}$/.test(name))
  } catch (error) {
    if (isErrno(error, 'ENOENT')) return []
    throw ioError(`read ${dir}`, error)
  }
}

/** `SESSION_PERSISTENCE_READ_ONLY` for a put on a backend opened read-only. */
export function readOnlyAttachments(root: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_READ_ONLY',
    `This persistence backend was opened read-only over ${root}; open it without readOnly to store attachments.`,
  )
}

/** `SESSION_PERSISTENCE_CORRUPT` for a stored attachment (or its directory) that is not what was written. */
function damaged(path: string, why: string): Error {
  return persistenceError(
    'SESSION_PERSISTENCE_CORRUPT',
    `The attachment store at ${path} is damaged: ${why}. Stored bytes are never rewritten automatically; restore the file from a backup or delete the session explicitly.`,
  )
}
