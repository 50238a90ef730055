import type { ImportV0Error } from './errors.js'
import type { LogFile } from './log-file.js'
import { FRAME_BYTES_MAX, type FrameScan, type FrameSource, type FrameWindow, oversizedFrame, scanUntilFault } from './zstd-frames.js'

const EMPTY = Buffer.alloc(0)

/**
 * The complete frames of a zstd log file, found a read at a time: each
 * `next()` reads on (`LogFile.extend`) until what it holds starts with at
 * least one complete frame, returns those frames, and carries the bytes of
 * the incomplete one after them into the next read. So the log is held a
 * chunk and one frame at a time; a frame that runs on past `FRAME_BYTES_MAX`
 * is refused (`oversizedFrame`), never read whole.
 *
 * Invariants: frames come in log order, numbered and placed as in the whole
 * log; a fault where a frame must start is thrown by the `next()` after the
 * one that returned the complete frames before it; at the end of the file,
 * `torn` is the incomplete last frame (what the harness drops as a torn tail).
 */
export class FrameWindows implements FrameSource {
  /** The incomplete final frame and its number, once the end was reached (`undefined`: the log ends on a frame boundary). */
  torn: { readonly scan: NonNullable<FrameScan['torn']>; readonly index: number } | undefined
  private carry: Buffer = EMPTY
  private nextFrame = 0
  private fault: ImportV0Error | undefined
  private done = false

  constructor(private readonly file: LogFile) {}

  async next(): Promise<FrameWindow | undefined> {
    if (this.fault !== undefined) throw this.fault
    if (this.done) return undefined
    for (;;) {
      const bytes = this.file.ended ? this.carry : await this.file.extend(this.carry, FRAME_BYTES_MAX + 1)
      const origin = { offset: this.file.position - bytes.length, frame: this.nextFrame }
      const { spans, torn, fault } = scanUntilFault(bytes, Number.POSITIVE_INFINITY, origin)
      if (fault !== undefined) {
        this.fault = fault
        this.carry = EMPTY
        if (spans.length === 0) throw fault
      }
      const last = spans.at(-1)
      if (last !== undefined) {
        const used = last.offset + last.size
        if (fault === undefined) this.carry = bytes.subarray(used)
        this.nextFrame += spans.length
        return { bytes: bytes.subarray(0, used), origin, spans }
      }
      if (this.file.ended) {
        this.done = true
        this.carry = EMPTY
        if (torn !== undefined) this.torn = { scan: { rest: torn.rest, offset: origin.offset + torn.offset }, index: this.nextFrame }
        return undefined
      }
      if (bytes.length > FRAME_BYTES_MAX) {
        this.fault = oversizedFrame(bytes, origin)
        this.carry = EMPTY
        throw this.fault
      }
      this.carry = bytes
    }
  }
}
