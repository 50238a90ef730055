import { promises as fsp } from 'node:fs'
import { join } from 'node:path'
import { expandRow, isRowType } from './chunk-rows.js'
import { ImportV0Error } from './errors.js'
import { decodeSegment, NO_CWD_DIR, PLAIN_LOG, type V0Compression, v0LogPath, ZSTD_LOG } from './layout.js'
import { parseHeaderLine, type V0Event, type V0Header } from './v0-types.js'
import { decodeFrames } from './zstd-frames.js'

/**
 * Reading a v0 root. Reads never write: files are opened read-only and
 * nothing is created, locked or repaired in the v0 root.
 *
 * Invariants: a log yields its header and the contiguous event prefix the
 * harness would read (complete records of a torn final frame included, rows
 * expanded); any fault in a COMPLETE part of the log is an `ImportV0Error`
 * naming it, never a silently shorter log.
 */

export interface V0Log {
  readonly path: string
  readonly compression: V0Compression
  readonly header: V0Header
  /** Every committed event, rows expanded, `events[i].seq === i`. */
  readonly events: V0Event[]
  /** Lines that were packed chunk rows. */
  readonly packedRows: number
  /** The source text each event came from, in UTF-16 units (a row's members share its line): what an import sizes its append batches by. */
  readonly textLengths: readonly number[]
  /** Bytes of an incomplete final frame / line that were not (entirely) read. */
  readonly tornBytes: number
}

/** A session directory of a v0 root: where its log is, and the id its directory name encodes. */
export interface V0LogEntry {
  readonly path: string
  readonly compression: V0Compression
  /** The id the session directory name encodes, when it is a valid encoding. */
  readonly dirId: string | undefined
}

/** Every session log of a v0 root (`<root>/<project>/<session>/session.jsonl[.zstd]`), sorted by path. */
export async function listV0Logs(root: string): Promise<V0LogEntry[]> {
  const entries: V0LogEntry[] = []
  for (const project of await subdirs(root)) {
    if (project !== NO_CWD_DIR && !(project.startsWith('--') && project.endsWith('--') && project.length >= 4)) continue
    for (const session of await subdirs(join(root, project))) {
      const dir = join(root, project, session)
      for (const [file, compression] of [
        [ZSTD_LOG, 'zstd'],
        [PLAIN_LOG, 'none'],
      ] as const) {
        const path = join(dir, file)
        const stat = await fsp.lstat(path).catch(() => undefined)
        if (stat?.isFile() === true) entries.push({ path, compression, dirId: decodeSegment(session) })
      }
    }
  }
  return entries.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0))
}

/**
 * True when `dir` holds at least one v0 session log (`--<project>--/<id>/session.jsonl[.zstd]`
 * or `_no-cwd/<id>/…`): for commands that meet a directory that is not a dsh
 * root and can suggest `dsh import --from dsh-v0`. Reads directory entries only.
 */
export async function isV0Root(dir: string): Promise<boolean> {
  try {
    return (await listV0Logs(dir)).length > 0
  } catch {
    return false
  }
}

async function subdirs(dir: string): Promise<string[]> {
  const names = await fsp.readdir(dir, { withFileTypes: true })
  // Symlinks are not followed: a v0 root's sessions are real directories under it.
  return names
    .filter((entry) => entry.isDirectory())
    .map((entry) => entry.name)
    .sort()
}

/** Reads one v0 log whole. `root` is used to check that the log sits where its header puts it. */
export async function readV0Log(root: string, entry: V0LogEntry): Promise<V0Log> {
  let bytes: Buffer
  try {
    bytes = await fsp.readFile(entry.path)
  } catch (error) {
    throw new ImportV0Error('IMPORT_V0_IO', `Cannot read ${entry.path}: ${(error as Error).message}`, { cause: error })
  }
  const log = parseV0Log(bytes, entry.compression, entry.path)
  assertPlaced(root, log.header, entry)
  return log
}

/** Refuses a log that is not where its header's id and cwd put it (the harness refuses it too). */
export function assertPlaced(root: string, header: V0Header, entry: V0LogEntry): void {
  const expected = v0LogPath(root, header.id, header.cwd, entry.compression)
  if (expected === entry.path) return
  throw new ImportV0Error(
    'IMPORT_V0_MISPLACED',
    `The log's header names session ${JSON.stringify(header.id)}${header.cwd === undefined ? ' without a cwd' : ` in ${header.cwd}`}, which the v0 layout keeps at ${expected}, not at ${entry.path}.`,
    { details: { expected } },
  )
}

/** Parses the bytes of a v0 log (`zstd` frames or plain JSON lines). */
export function parseV0Log(bytes: Buffer, compression: V0Compression, path = '<memory>'): V0Log {
  const parser = new LineParser()
  let tornBytes = 0
  if (compression === 'zstd') {
    const { frames, plain, ends, torn, tornBytes: tornFrameBytes } = decodeFrames(bytes)
    const first = frames[0]
    if (first === undefined) {
      throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log holds no complete frame: its header was never committed.')
    }
    if (first.length === 0 || first.indexOf(0x0a) !== first.length - 1) {
      throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'Frame 0 must hold exactly the header line.')
    }
    parser.header(first.toString('utf8', 0, first.length - 1))
    // Every later frame is whole lines; then the frames' plaintext is read as one run of lines.
    for (let i = 1; i < ends.length; i++) {
      const end = ends[i] as number
      if (end === ends[i - 1]) continue
      if (plain[end - 1] !== 0x0a) {
        throw new ImportV0Error('IMPORT_V0_BAD_JSON', `Frame ${i} is complete but ends inside a line (a batch is whole lines).`, {
          details: { frame: i },
        })
      }
    }
    linesOf(parser, plain, ends[0] as number, plain.length)
    tornBytes = tornFrameBytes
    if (torn !== undefined) {
      const end = torn.lastIndexOf(0x0a)
      if (end >= 0) parser.lines(torn.toString('utf8', 0, end))
    }
  } else {
    const headerEnd = bytes.indexOf(0x0a)
    if (headerEnd < 0)
      throw new ImportV0Error('IMPORT_V0_BAD_HEADER', 'The log has no complete first line: its header was never committed.')
    parser.header(bytes.toString('utf8', 0, headerEnd))
    const end = bytes.lastIndexOf(0x0a)
    if (end > headerEnd) linesOf(parser, bytes, headerEnd + 1, end + 1)
    tornBytes = bytes.length - end - 1
  }
  return {
    path,
    compression,
    header: parser.v0Header(),
    events: parser.events,
    packedRows: parser.packedRows,
    textLengths: parser.textLengths,
    tornBytes,
  }
}

/** Text is decoded this much at a time (a JS string has a length limit; a log does not). */
export const TEXT_SLICE = 32 * 1024 * 1024

/** Parses the newline-terminated lines in `bytes[start, end)`, a slice of about `TEXT_SLICE` at a time, cut at line ends. */
function linesOf(parser: LineParser, bytes: Buffer, start: number, end: number): void {
  let at = start
  while (at < end) {
    let cut = end
    if (end - at > TEXT_SLICE) {
      const newline = bytes.lastIndexOf(0x0a, at + TEXT_SLICE - 1)
      cut = newline >= at ? newline + 1 : bytes.indexOf(0x0a, at + TEXT_SLICE) + 1
    }
    parser.lines(bytes.toString('utf8', at, cut - 1))
    at = cut
  }
}

class LineParser {
  readonly events: V0Event[] = []
  readonly textLengths: number[] = []
  packedRows = 0
  private parsedHeader: V0Header | undefined
  private line = 1

  header(text: string): void {
    this.parsedHeader = parseHeaderLine(text)
  }

  v0Header(): V0Header {
    return this.parsedHeader as V0Header
  }

  lines(text: string): void {
    for (const lineText of text.split('\n')) {
      this.line += 1
      let value: unknown
      try {
        value = JSON.parse(lineText)
      } catch {
        throw new ImportV0Error('IMPORT_V0_BAD_JSON', `Line ${this.line} is not JSON.`, { details: { line: this.line } })
      }
      if (typeof value !== 'object' || value === null || Array.isArray(value)) {
        throw new ImportV0Error('IMPORT_V0_BAD_JSON', `Line ${this.line} is not a JSON object.`, { details: { line: this.line } })
      }
      const record = value as Record<string, unknown>
      const first = this.events.length
      if (isRowType(record.type)) {
        this.packedRows += 1
        expandRow(record, record.type, this.line, this.events)
        const share = Math.ceil(lineText.length / (this.events.length - first))
        for (let i = first; i < this.events.length; i++) this.textLengths.push(share)
        this.checkSeqs(first)
        continue
      }
      if (typeof record.type !== 'string' || record.type.length === 0 || typeof record.time !== 'number' || !Number.isFinite(record.time)) {
        throw new ImportV0Error(
          'IMPORT_V0_BAD_JSON',
          `Line ${this.line} is not an event line (it needs a string type and a numeric time).`,
          {
            details: { line: this.line },
          },
        )
      }
      this.events.push(record as unknown as V0Event)
      this.textLengths.push(lineText.length)
      this.checkSeqs(first)
    }
  }

  private checkSeqs(from: number): void {
    for (let i = from; i < this.events.length; i++) {
      const seq = (this.events[i] as V0Event).seq
      if (seq !== i) {
        throw new ImportV0Error(
          'IMPORT_V0_SEQ_GAP',
          `Line ${this.line} has seq ${JSON.stringify(seq)} where seq ${i} comes next: the event sequence has a gap.`,
          {
            details: { line: this.line, expected: i, seq },
          },
        )
      }
    }
  }
}
