import { ImportV0Error } from './errors.js'
import type { V0Event } from './v0-types.js'

/**
 * Packed chunk rows: the harness stores a run of consecutive same-block delta
 * `assistant/chunk` events as ONE line `{type, seq0, time0, data: {turn, step,
 * index, dt, texts | (id, name?, args)}}`. Member k is seq `seq0 + k`, time
 * `time0` plus the first k gaps. Rows are storage, not events: a reader always
 * expands them, so a log's meaning never depends on whether it was packed.
 *
 * Invariants: expansion is exact (integer times, safe-integer checks), a
 * malformed row is an error (never a silently dropped run), and packing only
 * takes events whose whole shape it recognises — anything else stays one line.
 */

export const ROW_TYPES = ['text-chunks', 'reasoning-chunks', 'tool-call-chunks'] as const
export type RowType = (typeof ROW_TYPES)[number]

/** Runs shorter than this stay one event per line (the harness's constant). */
export const MIN_RUN = 3

export function isRowType(type: unknown): type is RowType {
  return type === 'text-chunks' || type === 'reasoning-chunks' || type === 'tool-call-chunks'
}

type Json = Record<string, unknown>

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function exactKeys(value: Json, keys: readonly string[]): boolean {
  const own = Object.keys(value)
  return own.length === keys.length && keys.every((key) => Object.hasOwn(value, key))
}

function malformed(type: string, why: string, line: number): never {
  throw new ImportV0Error('IMPORT_V0_BAD_ROW', `Line ${line}: the ${type} row is malformed: ${why}.`, { details: { line } })
}

/**
 * Makes the event of one member of a validated row: `data` is the row's data
 * (`turn`, `step`, `index`, and `id`/`name` for tool calls), `delta` the
 * member's text (or argument) piece.
 */
export type RowMemberMaker<E> = (type: RowType, seq: number, time: number, data: Readonly<Json>, delta: string) => E

/** The v0 event of a row member: an `assistant/chunk` with its delta chunk. */
export const v0RowMember: RowMemberMaker<V0Event> = (type, seq, time, data, delta) => {
  const chunk =
    type === 'tool-call-chunks'
      ? Object.hasOwn(data, 'name')
        ? { type: 'tool-call-delta', index: data.index as number, id: data.id, name: data.name, argumentsDelta: delta }
        : { type: 'tool-call-delta', index: data.index as number, id: data.id, argumentsDelta: delta }
      : { type: type === 'text-chunks' ? 'text-delta' : 'reasoning-delta', index: data.index as number, text: delta }
  return new RowMember(seq, time, { turn: data.turn as number, step: data.step as number, chunk })
}

/**
 * Makes one item standing for every member of a validated row (`members` the
 * text or argument pieces, `dt` the gaps), or returns `undefined` to have the
 * members made one by one by a `RowMemberMaker`.
 */
export type RowMaker<E> = (
  type: RowType,
  seq0: number,
  time0: number,
  data: Readonly<Json>,
  members: readonly string[],
  dt: readonly number[],
) => E | undefined

/**
 * Validates a row and appends its members to `out`: one item for them all
 * when `makeRow` makes it, else one event each (made by `make`). Returns the
 * number of members. `line` is the 1-based line number for messages.
 */
export function expandRow<E>(row: Json, type: RowType, line: number, out: E[], make: RowMemberMaker<E>, makeRow?: RowMaker<E>): number {
  if (!exactKeys(row, ['type', 'seq0', 'time0', 'data'])) malformed(type, 'the envelope must be exactly {type, seq0, time0, data}', line)
  const { seq0, time0, data } = row
  if (!Number.isSafeInteger(seq0) || (seq0 as number) < 0) malformed(type, 'seq0 must be a non-negative safe integer', line)
  if (!Number.isSafeInteger(time0)) malformed(type, 'time0 must be a safe integer', line)
  if (!isObject(data)) malformed(type, 'data must be an object', line)
  const tool = type === 'tool-call-chunks'
  const withName = tool && Object.hasOwn(data, 'name')
  const keys = tool
    ? ['turn', 'step', 'index', 'id', ...(withName ? ['name'] : []), 'dt', 'args']
    : ['turn', 'step', 'index', 'dt', 'texts']
  if (!exactKeys(data, keys)) malformed(type, `data must be exactly {${keys.join(', ')}}`, line)
  if (typeof data.turn !== 'number' || typeof data.step !== 'number' || typeof data.index !== 'number') {
    malformed(type, 'turn, step and index must be numbers', line)
  }
  if (tool && (typeof data.id !== 'string' || (withName && typeof data.name !== 'string')))
    malformed(type, 'id (and name) must be strings', line)
  const members = tool ? data.args : data.texts
  if (!Array.isArray(members) || members.length === 0 || members.some((m) => typeof m !== 'string')) {
    malformed(type, `${tool ? 'args' : 'texts'} must be a non-empty array of strings`, line)
  }
  const dt = data.dt
  if (!Array.isArray(dt) || dt.length !== members.length - 1 || dt.some((gap) => !Number.isSafeInteger(gap))) {
    malformed(type, `dt must hold ${members.length - 1} safe-integer gaps`, line)
  }
  if (!Number.isSafeInteger((seq0 as number) + members.length - 1)) malformed(type, 'member seqs leave the safe-integer range', line)
  let last = time0 as number
  for (const gap of dt as number[]) {
    last += gap
    if (!Number.isSafeInteger(last)) malformed(type, 'member times leave the safe-integer range', line)
  }
  const whole = makeRow?.(type, seq0 as number, time0 as number, data, members as string[], dt as number[])
  if (whole !== undefined) {
    out.push(whole)
    return members.length
  }
  let time = time0 as number
  for (let k = 0; k < members.length; k++) {
    if (k > 0) time += dt[k - 1] as number
    out.push(make(type, (seq0 as number) + k, time, data, members[k] as string))
  }
  return members.length
}

/**
 * One event expanded from a packed row. Its shape is canonical by
 * construction (`{type: 'assistant/chunk', seq, time, data: {turn, step, chunk}}`),
 * which lets the converter skip the checks an arbitrary line needs.
 */
export class RowMember implements V0Event {
  // Declared in line order, so the instance's keys are the canonical `type, seq, time, data`.
  readonly type: 'assistant/chunk'
  readonly seq: number
  readonly time: number
  readonly data: {
    readonly turn: number
    readonly step: number
    readonly chunk: { readonly type: string; readonly index: number; readonly text?: string }
  }

  constructor(seq: number, time: number, data: RowMember['data']) {
    this.type = 'assistant/chunk'
    this.seq = seq
    this.time = time
    this.data = data
  }
}

type DeltaKind = 'text-delta' | 'reasoning-delta' | 'tool-call-delta'

/** The delta kind of an event the packer may take: its whole shape recognised, integer seq and time. */
function deltaKind(event: V0Event): DeltaKind | undefined {
  if (event.type !== 'assistant/chunk' || !exactKeys(event as unknown as Json, ['type', 'seq', 'time', 'data'])) return undefined
  if (!Number.isSafeInteger(event.seq) || !Number.isSafeInteger(event.time)) return undefined
  const data = event.data
  if (!isObject(data) || !exactKeys(data, ['turn', 'step', 'chunk']) || typeof data.turn !== 'number' || typeof data.step !== 'number')
    return undefined
  const chunk = data.chunk
  if (!isObject(chunk) || typeof chunk.index !== 'number') return undefined
  if (chunk.type === 'text-delta' || chunk.type === 'reasoning-delta') {
    return exactKeys(chunk, ['type', 'index', 'text']) && typeof chunk.text === 'string' ? chunk.type : undefined
  }
  if (chunk.type === 'tool-call-delta') {
    const named = exactKeys(chunk, ['type', 'index', 'id', 'name', 'argumentsDelta']) && typeof chunk.name === 'string'
    const plain = exactKeys(chunk, ['type', 'index', 'id', 'argumentsDelta'])
    return (named || plain) && typeof chunk.id === 'string' && typeof chunk.argumentsDelta === 'string' ? 'tool-call-delta' : undefined
  }
  return undefined
}

function chunkOf(event: V0Event): Json {
  return (event.data as Json).chunk as Json
}

function continues(prev: V0Event, next: V0Event, kind: DeltaKind): boolean {
  if (next.seq !== prev.seq + 1 || !Number.isSafeInteger(next.time - prev.time)) return false
  const a = prev.data as Json
  const b = next.data as Json
  if (a.turn !== b.turn || a.step !== b.step || chunkOf(prev).index !== chunkOf(next).index) return false
  if (kind !== 'tool-call-delta') return true
  const ca = chunkOf(prev)
  const cb = chunkOf(next)
  return ca.id === cb.id && Object.hasOwn(ca, 'name') === Object.hasOwn(cb, 'name') && ca.name === cb.name
}

function row(kind: DeltaKind, run: readonly V0Event[]): Json {
  const first = run[0] as V0Event
  const data = first.data as Json
  const chunk = chunkOf(first)
  const base = {
    turn: data.turn,
    step: data.step,
    index: chunk.index,
    dt: run.slice(1).map((event, i) => event.time - (run[i] as V0Event).time),
  }
  if (kind === 'tool-call-delta') {
    return {
      type: 'tool-call-chunks',
      seq0: first.seq,
      time0: first.time,
      data: {
        turn: base.turn,
        step: base.step,
        index: base.index,
        id: chunk.id,
        ...(Object.hasOwn(chunk, 'name') ? { name: chunk.name } : {}),
        dt: base.dt,
        args: run.map((event) => chunkOf(event).argumentsDelta),
      },
    }
  }
  return {
    type: kind === 'text-delta' ? 'text-chunks' : 'reasoning-chunks',
    seq0: first.seq,
    time0: first.time,
    data: { ...base, texts: run.map((event) => chunkOf(event).text) },
  }
}

/** Packs each run of at least `MIN_RUN` same-block delta chunks of a batch into one row; every other event passes through. */
export function packChunkRuns(events: readonly V0Event[]): unknown[] {
  const out: unknown[] = []
  let kind: DeltaKind | undefined
  let run: V0Event[] = []
  const flush = (): void => {
    if (kind !== undefined && run.length >= MIN_RUN) out.push(row(kind, run))
    else out.push(...run)
    kind = undefined
    run = []
  }
  for (const event of events) {
    const k = deltaKind(event)
    if (k === undefined) {
      flush()
      out.push(event)
      continue
    }
    const last = run.at(-1)
    if (k === kind && last !== undefined && continues(last, event, k)) {
      run.push(event)
      continue
    }
    flush()
    kind = k
    run = [event]
  }
  flush()
  return out
}
