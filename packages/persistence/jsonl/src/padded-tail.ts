import { paddedRevisionOf } from './fs-io.js'
import { type PaddedWrite, planPaddedAppend, planSettledSlot, type SettledSlot, type TailExtent, trailerCheckOf } from './log-padding.js'
import type { VerifiedTail } from './log-tail.js'

/**
 * Where an open log ends, as its writer knows it: the committed end, the
 * file's end (past the committed end when the log ends with padding), the
 * newest end slot (its generation and the end it names), the last batch
 * trailer's CRC field, and the file's inode (a padded log's revision is
 * computed from these without a `stat`).
 *
 * An immutable value: each change of a log's end is one of its transitions,
 * which returns the next tail; what is written is planned, as pure values,
 * by `log-padding.ts`. The writer replaces its tail only with what a
 * transition returned, after the bytes it stands for are durable.
 */
export class PaddedTail implements TailExtent {
  private constructor(
    readonly ino: number,
    readonly committedEnd: number,
    /** The file's size: `committedEnd`, or beyond it when the log ends with padding. */
    readonly fileEnd: number,
    /** The newest end slot's generation (0 without padding). */
    readonly generation: number,
    /** The end the newest slot names (`committedEnd` without padding): a slot is written again past `checkpointDistance` from it. */
    readonly checkpoint: number,
    /** The last batch trailer's CRC field (what a slot at the committed end records; 0 while the log has had no padded append). */
    readonly trailerCheck: number,
  ) {}

  /** A log without padding that ends at `end`: just published, or rewritten whole. */
  static unpadded(ino: number, end: number): PaddedTail {
    return new PaddedTail(ino, end, end, 0, end, 0)
  }

  /** What a fresh writer found at the end of the log (`LogReader.verifyTail`, or a scan). */
  static found(ino: number, tail: VerifiedTail): PaddedTail {
    return new PaddedTail(ino, tail.committedEnd, tail.fileEnd, tail.generation, tail.checkpoint, tail.slot?.trailerCheck ?? 0)
  }

  /** The writes of a batch `body` + `trailer` into the padding, or growing it (`planPaddedAppend`); `nextSeq` is the seq after the batch. */
  planAppend(body: Buffer, trailer: Buffer, nextSeq: number): PaddedWrite {
    return planPaddedAppend(this, body, trailer, nextSeq)
  }

  /** After a batch ending with `trailer` is durable: as `write` planned it, or (an unpadded log) written at the committed end. */
  appended(body: Buffer, trailer: Buffer, write: PaddedWrite | undefined): PaddedTail {
    const check = trailerCheckOf(trailer)
    if (write === undefined) {
      const end = this.committedEnd + body.length + trailer.length
      return new PaddedTail(this.ino, end, end, 0, end, check)
    }
    const { committedEnd, fileEnd, generation, checkpoint } = write.tail
    return new PaddedTail(this.ino, committedEnd, fileEnd, generation, checkpoint, check)
  }

  /** After the file was truncated back to the committed end (a failed append): no padding; the next append grows it again. */
  truncated(): PaddedTail {
    return new PaddedTail(this.ino, this.committedEnd, this.committedEnd, 0, this.committedEnd, this.trailerCheck)
  }

  /** The slot naming the committed end, when the newest names an earlier one (`planSettledSlot`): what a writer releasing the log writes. */
  planSettle(nextSeq: number): SettledSlot | undefined {
    return planSettledSlot(this, nextSeq, this.trailerCheck)
  }

  /** After the slot `settle` planned was written. */
  settled(settle: SettledSlot): PaddedTail {
    return new PaddedTail(this.ino, this.committedEnd, this.fileEnd, settle.tail.generation, settle.tail.checkpoint, this.trailerCheck)
  }

  /** The revision of the padded log this tail ends (`paddedRevisionOf`): its header's CRC, inode, size, committed end and last trailer. */
  revision(headerCrc: number): string {
    return paddedRevisionOf(headerCrc, this.ino, this.fileEnd, { end: this.committedEnd, trailerCheck: this.trailerCheck })
  }
}
