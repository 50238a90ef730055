import { randomBytes } from 'node:crypto'
import { closeSync, constants, fchmodSync, fsyncSync, lstatSync, openSync, renameSync, rmSync, type Stats, writeSync } from 'node:fs'
// The bundled CLI loads zod through a chunk that imports the bundler's runtime,
// which loads node:module; the command states that load, so the bundle's check
// (bundling adds no module a command did not already load) holds.
import 'node:module'
import { basename, dirname, join } from 'node:path'
import { openApiDocument } from '@dsh/protocol/openapi'
import { type CommandIo, noPositionals, type ParsedCommand } from '../command.js'
import { CliError } from '../errors.js'
import { printJson } from '../output.js'
import { safe } from '../terminal.js'

/**
 * `dsh openapi [--out FILE]`: the OpenAPI 3.1 document of the HTTP API (what
 * `GET /api/openapi.json` serves), to stdout or to FILE. It reads no root.
 */
export async function run(command: ParsedCommand, io: CommandIo): Promise<number> {
  noPositionals(command)
  const text = `${JSON.stringify(openApiDocument(), null, 2)}\n`
  const out = command.string('out')
  if (out === undefined) {
    io.out.write(text)
    return 0
  }
  writePrivateFile(out, text)
  const bytes = Buffer.byteLength(text)
  if (command.json) printJson({ path: out, bytes }, io.out)
  else io.out.write(safe`Wrote the OpenAPI document (${String(bytes)} bytes) to ${out}.\n`)
  return 0
}

/**
 * Writes `text` to `path` with mode 0600: into a new file beside it, then
 * renamed over it, so a failure leaves no partial file and an existing file
 * (whatever its mode) is replaced by a private one. Only a regular file is
 * replaced: a symlink, FIFO, device or socket at `path` is refused and left
 * as it is (the rename would put a file in its place, not write through it).
 */
function writePrivateFile(path: string, text: string): void {
  if (path === '' || basename(path) === '' || path.endsWith('/')) refuse(path, 'names no file')
  refuseSpecial(path)
  const temp = join(dirname(path), `.${basename(path)}.${randomBytes(6).toString('hex')}.tmp`)
  let fd: number
  try {
    fd = openSync(temp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600)
  } catch (error) {
    refuse(path, reason(error), error)
  }
  try {
    fchmodSync(fd, 0o600)
    writeSync(fd, text)
    fsyncSync(fd)
    closeSync(fd)
    // Checked again just before the rename: the target may have changed while the document was written.
    refuseSpecial(path)
    renameSync(temp, path)
  } catch (error) {
    try {
      closeSync(fd)
    } catch {
      // Already closed: the failure came after closeSync (the last check or the rename).
    }
    rmSync(temp, { force: true })
    if (error instanceof CliError) throw error
    refuse(path, reason(error), error)
  }
}

/** Refuses an existing `path` that is not a regular file (lstat: a symlink is not followed); a missing one is fine. */
function refuseSpecial(path: string): void {
  let stats: Stats
  try {
    stats = lstatSync(path)
  } catch {
    // Missing (created by the rename) or unreachable (the open or rename reports why).
    return
  }
  if (stats.isFile() || stats.isDirectory()) return
  const kind = stats.isSymbolicLink()
    ? 'a symbolic link'
    : stats.isFIFO()
      ? 'a FIFO'
      : stats.isCharacterDevice() || stats.isBlockDevice()
        ? 'a device'
        : stats.isSocket()
          ? 'a socket'
          : 'not a regular file'
  throw new CliError(
    'CLI_OUTPUT_INVALID',
    `--out '${path}' is ${kind}, which is never replaced; name a regular file or a new path (or write to stdout without --out and redirect it).`,
  )
}

function reason(error: unknown): string {
  switch ((error as NodeJS.ErrnoException).code) {
    case 'ENOENT':
      return 'is in a directory that does not exist'
    case 'ENOTDIR':
      return 'has a parent that is not a directory'
    case 'EISDIR':
      return 'is a directory'
    case 'EACCES':
    case 'EPERM':
    case 'EROFS':
      return 'is in a directory this user cannot write'
    case 'ENOSPC':
    case 'EDQUOT':
      return 'is on a full disk'
    default:
      return `cannot be written (${(error as NodeJS.ErrnoException).code ?? 'unknown error'})`
  }
}

function refuse(path: string, why: string, cause?: unknown): never {
  throw new CliError('CLI_OUTPUT_INVALID', `--out '${path}' ${why}; name a file in an existing, writable directory.`, {
    ...(cause === undefined ? {} : { cause }),
  })
}
