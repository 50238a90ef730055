import { promises as fsp } from 'node:fs'
import { dirname } from 'node:path'
import { packChunkRuns } from './chunk-rows.js'
import { ImportV0Error, ioFailure } from './errors.js'
import { type V0Compression, v0LogPath } from './layout.js'
import { headerLineText, type V0Event, type V0Header } from './v0-types.js'
import { encodeFrame } from './zstd-frames.js'

/**
 * Writing the v0 format (for `exportV0` and for test fixtures), from the
 * format description: frame 0 the header line, then one frame per append
 * batch of newline-terminated lines, each frame a standard zstd frame with the
 * content checksum; or the same lines uncompressed in `session.jsonl`.
 *
 * Invariants: a batch is never split across frames and a frame never ends
 * inside a line; an existing log is never overwritten (exports create, tests
 * that need growth append whole frames); directories 0700, files 0600.
 */

export interface V0WriteOptions {
  /** `zstd` (default, the harness's default) or `none` (`session.jsonl`). */
  readonly compression?: V0Compression
  /** Pack runs of delta chunks into `*-chunks` rows, as the harness does by default (default true). */
  readonly packChunks?: boolean
}

/** The bytes of one append batch (its lines; one frame when compressed). */
export function v0BatchBytes(events: readonly V0Event[], options: V0WriteOptions = {}): Buffer {
  const records = options.packChunks === false ? events : packChunkRuns(events)
  const text = `${records.map((record) => JSON.stringify(record)).join('\n')}\n`
  const plain = Buffer.from(text, 'utf8')
  return (options.compression ?? 'zstd') === 'zstd' ? encodeFrame(plain) : plain
}

/** The bytes of a whole log: the header unit, then one unit per non-empty batch. */
export function v0LogBytes(header: V0Header, batches: readonly (readonly V0Event[])[], options: V0WriteOptions = {}): Buffer {
  const headerLine = Buffer.from(`${headerLineText(header)}\n`, 'utf8')
  const parts = [(options.compression ?? 'zstd') === 'zstd' ? encodeFrame(headerLine) : headerLine]
  for (const batch of batches) if (batch.length > 0) parts.push(v0BatchBytes(batch, options))
  return Buffer.concat(parts)
}

/** Creates a session's log in a v0 root (never over an existing one); resolves its path. A file system failure is `IMPORT_V0_IO` naming the path. */
export async function writeV0Log(
  root: string,
  header: V0Header,
  batches: readonly (readonly V0Event[])[],
  options: V0WriteOptions = {},
): Promise<string> {
  const path = v0LogPath(root, header.id, header.cwd, options.compression ?? 'zstd')
  await fsp.mkdir(dirname(path), { recursive: true, mode: 0o700 }).catch((error: unknown) => {
    throw ioFailure(error, 'create', dirname(path))
  })
  let handle: fsp.FileHandle
  try {
    handle = await fsp.open(path, 'wx', 0o600)
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') {
      throw new ImportV0Error(
        'IMPORT_V0_EXPORT_EXISTS',
        `A v0 log already exists at ${path}; export into an empty directory or delete that session first.`,
        {
          details: { path },
        },
      )
    }
    throw ioFailure(error, 'create', path)
  }
  try {
    await handle.writeFile(v0LogBytes(header, batches, options))
    await handle.sync()
  } catch (error) {
    throw ioFailure(error, 'write', path)
  } finally {
    await handle.close()
  }
  return path
}

/** Appends one batch to an existing v0 log (a session that grew). */
export async function appendV0Batch(path: string, events: readonly V0Event[], options: V0WriteOptions = {}): Promise<void> {
  const handle = await fsp.open(path, 'a').catch((error: unknown) => {
    throw ioFailure(error, 'open', path)
  })
  try {
    await handle.writeFile(v0BatchBytes(events, options))
    await handle.sync()
  } catch (error) {
    throw ioFailure(error, 'write', path)
  } finally {
    await handle.close()
  }
}
