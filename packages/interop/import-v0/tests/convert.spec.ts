import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { toDshEvent, toV0Event, type V0Event } from '../src/index.js'

// The invariant export relies on: every v0 line comes back byte for byte
// through a dsh event, whatever its type, shape, envelope fields or key order.

// Any code units, lone surrogates included (a harness line may hold any string; fc.string's default unit is
// ASCII, and its 'binary' unit draws whole code points only, so a lone half is drawn on its own too).
const anyCodeUnit = fc.oneof(
  { arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }), weight: 9 },
  { arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((unit) => String.fromCharCode(unit)), weight: 1 },
)
const text = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: anyCodeUnit, maxLength: 12 }))
const int = fc.integer({ min: 0, max: 1_000 })
const json = fc
  .oneof(fc.jsonValue({ maxDepth: 3 }), fc.jsonValue({ maxDepth: 3, stringUnit: anyCodeUnit }))
  .map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const block = fc.oneof(
  fc.record({ type: fc.constant('text'), text }),
  fc.record({ type: fc.constant('reasoning'), text }),
  fc.record({ type: fc.constant('tool-call'), id: text, name: text, arguments: text }),
  fc.constant(null),
  json,
)
const message = (role: string) => fc.record({ id: text, role: fc.constant(role), content: fc.array(block, { maxLength: 4 }), source: json })

/** Plausible harness data for each core type, plus arbitrary JSON (unrecognised shapes). */
const data: Record<string, fc.Arbitrary<unknown>> = {
  'turn/start': fc.oneof(fc.record({ turn: int }), json),
  'turn/end': fc.oneof(
    fc.record({
      turn: int,
      reason: fc.record({ kind: fc.constantFrom('completed', 'aborted', 'blocked', 'error', 'max-tokens', 'interrupted', 'new') }),
    }),
    json,
  ),
  'user/message': fc.oneof(message('user'), json),
  'assistant/chunk': fc.oneof(
    fc.record({ turn: int, step: int, chunk: fc.record({ type: fc.constant('text-delta'), index: int, text }) }),
    fc.record({ turn: int, step: int, chunk: fc.record({ type: fc.constant('reasoning-delta'), index: int, text }) }),
    json,
  ),
  'assistant/message': fc.oneof(
    fc.record(
      { turn: int, step: int, message: message('assistant'), usage: fc.record({ inputTokens: int, outputTokens: int }) },
      { requiredKeys: ['turn', 'step', 'message'] },
    ),
    json,
  ),
  'tool/call': fc.oneof(
    fc.record({
      turn: int,
      step: int,
      callId: text,
      name: text,
      arguments: fc.oneof(
        text,
        json.map((v) => JSON.stringify(v)),
      ),
    }),
    json,
  ),
  'tool/result': fc.oneof(
    fc.record(
      {
        turn: int,
        step: int,
        message: fc.record({
          id: text,
          role: fc.constant('user'),
          content: fc.tuple(
            fc.record(
              { type: fc.constant('tool-result'), toolCallId: text, content: json, isError: fc.boolean() },
              { requiredKeys: ['type', 'toolCallId', 'content'] },
            ),
          ),
          source: json,
        }),
        error: json,
        meta: json,
      },
      { requiredKeys: ['turn', 'step', 'message'] },
    ),
    json,
  ),
  'step/start': json,
  'subagent/descriptor': json,
  'subagent/options': json,
  'subagent/start': json,
  'x/unknown': json,
}

/** The same object with its keys in a shuffled order (JSON.parse keeps whatever order the writer used). */
function shuffled(value: unknown, order: number[]): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value
  const keys = Object.keys(value)
  const out: Record<string, unknown> = {}
  const picked = keys.map((key, i) => [order[i % Math.max(order.length, 1)] ?? i, key] as const).sort((a, b) => a[0] - b[0])
  for (const [, key] of picked) out[key] = (value as Record<string, unknown>)[key]
  return out
}

const event = fc
  .constantFrom(...Object.keys(data))
  .chain((type) =>
    fc.record({
      type: fc.constant(type),
      data: data[type] as fc.Arbitrary<unknown>,
      ignorable: fc.option(fc.boolean(), { nil: undefined }),
      sourceEventSeqs: fc.option(fc.array(int, { maxLength: 3 }), { nil: undefined }),
      surfaceOp: fc.option(fc.constantFrom('append', { op: 'replace', start: 1, end: 2 }), { nil: undefined }),
      order: fc.option(fc.array(fc.integer({ min: 0, max: 9 }), { minLength: 1, maxLength: 5 }), { nil: undefined }),
    }),
  )
  .map(({ type, data: d, ignorable, sourceEventSeqs, surfaceOp, order }) => {
    const line: Record<string, unknown> = { type, seq: 3, time: 1_760_000_000_000, data: order === undefined ? d : shuffled(d, order) }
    if (ignorable !== undefined) line.ignorable = ignorable
    if (sourceEventSeqs !== undefined) line.sourceEventSeqs = sourceEventSeqs
    if (surfaceOp !== undefined) line.surfaceOp = surfaceOp
    return JSON.parse(JSON.stringify(line)) as V0Event
  })

describe('toDshEvent / toV0Event', () => {
  it('restores every line byte for byte', () => {
    fc.assert(
      fc.property(event, (line) => {
        const dsh = toDshEvent(line)
        expect(dsh.seq).toBe(line.seq)
        expect(dsh.time).toBe(line.time)
        expect(JSON.stringify(toV0Event(JSON.parse(JSON.stringify(dsh))))).toBe(JSON.stringify(line))
      }),
      { numRuns: 2000 },
    )
  })

  it('converts recognised core shapes to dsh shapes', () => {
    const user = toDshEvent({
      type: 'user/message',
      seq: 0,
      time: 1,
      data: { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }], source: { kind: 'user' } },
    })
    expect(user).toEqual({ type: 'user/message', seq: 0, time: 1, data: { text: 'hi', v0: { id: 'u', source: { kind: 'user' } } } })
    const end = toDshEvent({ type: 'turn/end', seq: 1, time: 1, data: { turn: 1, reason: { kind: 'blocked' } } })
    expect(end.data).toEqual({ turn: 1, reason: 'cancelled', v0: { reason: { kind: 'blocked' } } })
    const reasoning = toDshEvent({
      type: 'assistant/chunk',
      seq: 2,
      time: 1,
      data: { turn: 1, step: 0, chunk: { type: 'reasoning-delta', index: 0, text: 'hm' } },
    })
    expect(reasoning.type).toBe('v0/assistant/chunk')
    const withSurface = toDshEvent({ type: 'request/header', seq: 3, time: 1, data: {}, ignorable: true })
    expect(withSurface).toMatchObject({ type: 'v0/event', data: { type: 'request/header', ignorable: true } })
  })
})
