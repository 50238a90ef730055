import { Context } from '@dsh/context'
import { phraseNotices } from '@dsh/driver-openai'
import { requestMessages, requestStats } from '@dsh/driver-openai/testing/requests'
import { type Session, sessionStorePlugin } from '@dsh/session'
import { contextView, renderChat, renderResponses, type SessionContextService, sessionContextPlugin } from '@dsh/session-context'
import { type SessionProjections, sessionProjectionsPlugin } from '@dsh/session-projection'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { appendNotice, appendStep, beginSession, EVENTS_PER_STEP, MODEL, SYSTEM } from '../src/fixtures/context-step.js'
import { buildMessages } from '../src/fixtures/whole-log-chat.js'

// The context-step benchmark's short form, for CI: the same sessions (a step
// is an 80 B chunk, a tool call and a 2 KiB result) at 50 and 5,000 steps,
// each request built by the OpenAI driver's own request building
// (`requestMessages`, the function every model step calls), and every
// verdict a count or a size, none a time. One more step costs the same at
// both sizes: its five events folded, its two messages rendered, at most one
// 64-message chunk of kept messages compared, no notice phrased but the
// step's own, and its new messages checked for attachments; the body equals
// a fresh full render and the whole-log rebuild; a Responses request
// continuing the previous response carries as many bytes at 5,000 steps as
// at 50.

const RENDER = { model: MODEL, reasoningContent: true, system: SYSTEM } as const
const CHUNK = 64

let ctx: Context
let service: SessionContextService
let projections: SessionProjections

interface Grown {
  readonly session: Session
  next: number
}

/** How the driver builds a request for these sessions: the `sessionContext` service, the system prompt, an attachment source. */
const options = () => ({
  context: service,
  system: SYSTEM,
  attachments: () => ({ resolve: () => undefined, load: async () => 0 }),
})

async function grown(steps: number): Promise<Grown> {
  const session = ctx.require('sessions').create()
  beginSession(session)
  for (let i = 0; i < steps; i++) appendStep(session, i)
  await requestMessages(session, options())
  return { session, next: steps }
}

interface Cost {
  readonly applies: number
  readonly rendered: number
  readonly compared: number
  readonly rebuilds: number
  readonly phrased: number
  readonly attachmentChecks: number
}

/** One more step (and a child's notice after it, with `notice`): what building the next request cost, in counts. */
async function step(g: Grown, check: 'body' | 'notices' | 'none', notice = false): Promise<Cost> {
  const applies = projections.metrics.applies
  const before = requestStats(g.session)
  appendStep(g.session, g.next)
  if (notice) appendNotice(g.session, g.next)
  g.next++
  const body = await requestMessages(g.session, options())
  const after = requestStats(g.session)
  if (check !== 'none') {
    const context = await service.contextOf(g.session)
    expect(body).toEqual(renderChat(phraseNotices(context, new WeakMap(), undefined), RENDER).body.messages)
    if (check === 'body') expect(body).toEqual(buildMessages(g.session.events, { system: SYSTEM }))
  }
  return {
    applies: projections.metrics.applies - applies,
    rendered: after.chat.rendered - before.chat.rendered,
    compared: after.chat.compared - before.chat.compared,
    rebuilds: after.chat.rebuilds - before.chat.rebuilds,
    phrased: after.phrased - before.phrased,
    attachmentChecks: after.attachmentChecks - before.attachmentChecks,
  }
}

/** Bytes of a Responses request continuing the response of the session's last step. */
async function responsesBytes(g: Grown): Promise<number> {
  const state = await service.stateOf(g.session)
  const stepEnd = [...g.session.events].reverse().find((event) => event.type === 'step/end')!
  const body = renderResponses(contextView(state), { model: MODEL, previousResponse: { id: 'resp_last', throughSeq: stepEnd.seq } }).body
  expect(body.previous_response_id).toBe('resp_last')
  return Buffer.byteLength(JSON.stringify(body))
}

beforeAll(async () => {
  ctx = new Context()
  await ctx.activate(sessionStorePlugin())
  await ctx.activate(sessionProjectionsPlugin())
  await ctx.activate(sessionContextPlugin())
  service = ctx.require('sessionContext')
  projections = ctx.require('sessionProjections')
})
afterAll(async () => {
  await ctx.dispose()
})

describe('context-step (short form)', () => {
  it("one more step costs the driver's request building the same counts at 5,000 steps as at 50, and its body equals a fresh full render and the whole-log rebuild", async () => {
    const small = await grown(50)
    const large = await grown(5_000)
    for (let k = 0; k < 70; k++) {
      // The bodies are compared on the first step, across a chunk boundary (steps of two messages fill a chunk every 32) and on the last.
      const check = k === 0 || k === 35 || k === 69 ? 'body' : 'none'
      const s = await step(small, check)
      const l = await step(large, check)
      for (const cost of [s, l]) {
        expect(cost.applies).toBe(EVENTS_PER_STEP)
        expect(cost.rendered).toBe(2)
        expect(cost.rebuilds).toBe(0)
        expect(cost.compared).toBeLessThanOrEqual(CHUNK)
        expect(cost.phrased).toBe(0)
        // The step's two new messages, then the newest one loaded before.
        expect(cost.attachmentChecks).toBe(3)
      }
    }
    // The list is the renderer's own, extended in place: the system message, the task, two messages a step.
    const body = await requestMessages(large.session, options())
    expect(body).toHaveLength(2 + 2 * large.next)
    expect(body[0]).toEqual({ role: 'system', content: SYSTEM })
  })

  it("a step with a child's notice phrases that notice once, at 5,000 steps as at 50", async () => {
    const small = await grown(50)
    const large = await grown(5_000)
    for (let k = 0; k < 40; k++) {
      const notice = k % 3 === 0
      const check = k === 0 || k === 39 ? 'notices' : 'none'
      for (const cost of [await step(small, check, notice), await step(large, check, notice)]) {
        expect(cost.applies).toBe(EVENTS_PER_STEP + (notice ? 1 : 0))
        expect(cost.rendered).toBe(notice ? 3 : 2)
        expect(cost.rebuilds).toBe(0)
        expect(cost.compared).toBeLessThanOrEqual(CHUNK)
        expect(cost.phrased).toBe(notice ? 1 : 0)
      }
    }
  })

  it('a Responses request continuing the previous response carries the same bytes at 5,000 steps as at 50', async () => {
    const small = await grown(50)
    const large = await grown(5_000)
    const bytes = { small: await responsesBytes(small), large: await responsesBytes(large) }
    expect(bytes.large).toBeLessThanOrEqual(2 * bytes.small)
  })
})
