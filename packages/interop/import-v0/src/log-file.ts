import { promises as fsp } from 'node:fs'
import { LINE_MAX_BYTES } from '@dsh/protocol/limits'
import { ImportV0Error, lineTooLarge } from './errors.js'

/**
 * A v0 log file read in order a bounded piece at a time: a read returns the
 * bytes carried over from the one before (an incomplete line or frame)
 * followed by the next `READ_CHUNK` bytes of the file, so what a reader holds
 * of the file is a chunk and the one unit it has not seen the end of — never
 * the file. Opened read-only; nothing in the v0 root is changed.
 */

/** Bytes a log is read in at a time (and scanned in for its line lengths). */
export const READ_CHUNK = 1024 * 1024

const EMPTY = Buffer.alloc(0)

export class LogFile {
  /** Where the next read starts. */
  position = 0
  /** A read reached the end of the file. */
  ended = false
  /** Reads made by `extend`, and the largest buffer one returned (the carried bytes included): the file bytes held at once. */
  reads = 0
  largest = 0
  private closing: Promise<void> | undefined

  private constructor(
    private readonly handle: fsp.FileHandle,
    readonly path: string,
  ) {}

  static async open(path: string): Promise<LogFile> {
    try {
      return new LogFile(await fsp.open(path, 'r'), path)
    } catch (error) {
      throw ioError(path, error)
    }
  }

  /**
   * `carry` followed by the next bytes of the file, in a new buffer: a
   * `READ_CHUNK` of them, or as many as `carry` holds when that is more (a
   * unit longer than a chunk costs copies in proportion to its length, not
   * its square), and never more than makes `limit` bytes in all. Fewer
   * only at the end of the file (`ended` is set then).
   */
  async extend(carry: Buffer = EMPTY, limit = Number.POSITIVE_INFINITY): Promise<Buffer> {
    const want = Math.max(1, Math.min(Math.max(READ_CHUNK, carry.length), limit - carry.length))
    const out = Buffer.allocUnsafe(carry.length + want)
    carry.copy(out)
    let done = 0
    while (done < want) {
      const bytesRead = await this.read(out, carry.length + done, want - done, this.position + done)
      if (bytesRead === 0) {
        this.ended = true
        break
      }
      done += bytesRead
    }
    this.position += done
    this.reads += 1
    this.largest = Math.max(this.largest, carry.length + done)
    return out.subarray(0, carry.length + done)
  }

  /**
   * Refuses a plain log holding a line (a torn last one included) longer
   * than `LINE_MAX_BYTES` before any of its events are read: the whole file
   * is passed through one buffer of `READ_CHUNK` bytes, counting the bytes
   * since the last newline. Does not move `position`.
   */
  async checkLineLengths(): Promise<void> {
    const chunk = Buffer.allocUnsafe(READ_CHUNK)
    let run = 0
    let line = 1
    for (let position = 0; ; ) {
      const bytesRead = await this.read(chunk, 0, READ_CHUNK, position)
      if (bytesRead === 0) return
      position += bytesRead
      let at = 0
      for (let newline = chunk.indexOf(0x0a, at); newline !== -1 && newline < bytesRead; newline = chunk.indexOf(0x0a, at)) {
        if (run + newline - at > LINE_MAX_BYTES) throw lineTooLarge(line, run + newline - at)
        run = 0
        line++
        at = newline + 1
      }
      run += bytesRead - at
      if (run > LINE_MAX_BYTES) throw lineTooLarge(line, run)
    }
  }

  /** Closes the file (after any read in progress); later reads fail with `IMPORT_V0_IO`. Every call waits for the one close. */
  close(): Promise<void> {
    this.closing ??= this.handle.close().catch(() => {})
    return this.closing
  }

  private async read(into: Buffer, offset: number, length: number, position: number): Promise<number> {
    if (this.closing !== undefined) throw ioError(this.path, new Error('the log was closed while it was being read'))
    try {
      return (await this.handle.read(into, offset, length, position)).bytesRead
    } catch (error) {
      throw ioError(this.path, error)
    }
  }
}

function ioError(path: string, error: unknown): ImportV0Error {
  return new ImportV0Error('IMPORT_V0_IO', `Cannot read ${path}: ${(error as Error).message}`, { cause: error })
}
