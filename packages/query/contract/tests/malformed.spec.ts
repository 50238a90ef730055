import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { createSessionQuery, type SessionListFilter, type SessionQuery } from '../src/index.js'

function query(): SessionQuery {
  const ctx = new Context({ logger: { warn: () => {}, error: () => {} } })
  const sessions = new SessionStore(ctx)
  for (let i = 0; i < 6; i++)
    sessions.create({
      id: `s${i}`,
      createdAt: 100 + (i % 2),
      cwd: '/w',
      ...(i > 0 ? { parentSession: 's0', origin: 'subagent' as const, delegationDepth: 1 } : {}),
    })
  return createSessionQuery({ sessions })
}

async function outcome(promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'ok'
  } catch (error) {
    return (error as { code?: string }).code ?? `untyped ${String(error)}`
  }
}

// A value of the wrong type (or out of range) for each field.
const invalidFor: Record<string, fc.Arbitrary<unknown>> = {
  parentSession: fc.oneof(fc.constant(''), fc.integer(), fc.boolean(), fc.constant(null), fc.array(fc.string()), fc.object()),
  cwd: fc.oneof(fc.constant(''), fc.double(), fc.boolean(), fc.constant(null), fc.array(fc.string()), fc.object()),
  origin: fc.anything().filter((v) => v !== 'subagent' && v !== undefined),
  createdAt: fc.oneof(
    fc.integer(),
    fc.string(),
    fc.constant(null),
    fc.array(fc.nat()),
    fc.record({ from: fc.oneof(fc.integer({ max: -1 }), fc.double({ noInteger: true }), fc.string()) }),
    fc.record({ to: fc.oneof(fc.integer({ max: -1 }), fc.constant(null), fc.boolean()) }),
  ),
  limit: fc.anything().filter((v) => v !== undefined && !(Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= 1000)),
}
const validFilter: fc.Arbitrary<SessionListFilter> = fc.record(
  {
    parentSession: fc.constantFrom('s0', 's1', 'nobody'),
    origin: fc.constant('subagent' as const),
    cwd: fc.constantFrom('/w', '/elsewhere'),
    createdAt: fc.record({ from: fc.constantFrom(0, 100, 101), to: fc.constantFrom(101, 200) }, { requiredKeys: [] }),
  },
  { requiredKeys: [] },
)

describe('malformed listing requests (property-based)', () => {
  it('never fails with anything but a typed filter or cursor error, whatever the input', async () => {
    const q = query()
    await fc.assert(
      fc.asyncProperty(fc.anything(), async (input) => {
        expect(['ok', 'SESSION_QUERY_INVALID_FILTER', 'SESSION_QUERY_INVALID_CURSOR']).toContain(
          await outcome(q.listSessions(input as never)),
        )
      }),
      { numRuns: 500 },
    )
  })

  it('rejects a wrongly typed field with SESSION_QUERY_INVALID_FILTER', async () => {
    const q = query()
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...Object.keys(invalidFor)).chain((field) => fc.tuple(fc.constant(field), invalidFor[field]!)),
        async ([field, value]) => {
          expect(await outcome(q.listSessions({ [field]: value } as never))).toBe('SESSION_QUERY_INVALID_FILTER')
        },
      ),
      { numRuns: 300 },
    )
  })

  it('rejects arbitrary strings and forged base64url JSON as cursors', async () => {
    const q = query()
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string(),
          fc.base64String(),
          fc.jsonValue().map((v) => Buffer.from(JSON.stringify(v)).toString('base64url')),
          fc.uint8Array().map((b) => Buffer.from(b).toString('base64url')),
        ),
        async (cursor) => {
          expect(await outcome(q.listSessions({ cursor }))).toBe('SESSION_QUERY_INVALID_CURSOR')
        },
      ),
      { numRuns: 500 },
    )
  })

  it('rejects a cursor issued for another filter, and a tampered cursor never yields another error', async () => {
    const q = query()
    await fc.assert(
      fc.asyncProperty(validFilter, validFilter, fc.nat(), async (a, b, flip) => {
        const page = await q.listSessions({ ...a, limit: 1 })
        fc.pre(page.nextCursor !== undefined)
        const cursor = page.nextCursor!
        expect(await outcome(q.listSessions({ ...a, cursor }))).toBe('ok')
        if (JSON.stringify(normalize(a)) !== JSON.stringify(normalize(b)))
          expect(await outcome(q.listSessions({ ...b, cursor }))).toBe('SESSION_QUERY_INVALID_CURSOR')
        const i = flip % cursor.length
        const tampered = cursor.slice(0, i) + (cursor[i] === 'A' ? 'B' : 'A') + cursor.slice(i + 1)
        expect(['ok', 'SESSION_QUERY_INVALID_CURSOR']).toContain(await outcome(q.listSessions({ ...a, cursor: tampered })))
      }),
      { numRuns: 300 },
    )
  })
})

function normalize(f: SessionListFilter): unknown[] {
  return [f.parentSession ?? null, f.origin ?? null, f.cwd ?? null, f.createdAt?.from ?? null, f.createdAt?.to ?? null]
}
