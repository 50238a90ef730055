import { Context } from '@dsh/context'
import { type Session, sessionStorePlugin } from '@dsh/session'
import {
  type ChatRequest,
  chatRenderer,
  contextView,
  type IncrementalRenderer,
  renderChat,
  renderResponses,
  type SessionContextService,
  sessionContextPlugin,
} from '@dsh/session-context'
import { type SessionProjections, sessionProjectionsPlugin } from '@dsh/session-projection'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { appendStep, beginSession, EVENTS_PER_STEP, MODEL, SYSTEM } from '../src/fixtures/context-step.js'
import { buildMessages } from '../src/fixtures/whole-log-chat.js'

// The context-step benchmark's short form, for CI: the same sessions (a step
// is an 80 B chunk, a tool call and a 2 KiB result) at 50 and 5,000 steps,
// and every verdict a count or a size, none a time. One more step costs the
// same at both sizes: its five events folded, its two messages rendered,
// and at most one 64-message chunk of kept messages compared; the body the
// kept renderer builds equals a fresh full render and the whole-log rebuild;
// a Responses request continuing the previous response carries as many
// bytes at 5,000 steps as at 50.

const RENDER = { model: MODEL, reasoningContent: true, system: SYSTEM } as const
const CHUNK = 64

let ctx: Context
let service: SessionContextService
let projections: SessionProjections

interface Grown {
  readonly session: Session
  readonly renderer: IncrementalRenderer<ChatRequest>
  next: number
}

async function grown(steps: number): Promise<Grown> {
  const session = ctx.require('sessions').create()
  beginSession(session)
  for (let i = 0; i < steps; i++) appendStep(session, i)
  const renderer = chatRenderer(RENDER)
  renderer.render(await service.contextOf(session))
  return { session, renderer, next: steps }
}

/** One more step: what it cost, in counts. */
async function step(g: Grown, checkBody: boolean): Promise<{ applies: number; rendered: number; compared: number; rebuilds: number }> {
  const applies = projections.metrics.applies
  const before = g.renderer.stats
  appendStep(g.session, g.next++)
  const context = await service.contextOf(g.session)
  const body = g.renderer.render(context).body.messages
  const after = g.renderer.stats
  if (checkBody) {
    expect(body).toEqual(renderChat(context, RENDER).body.messages)
    expect(body).toEqual(buildMessages(g.session.events, { system: SYSTEM }))
  }
  return {
    applies: projections.metrics.applies - applies,
    rendered: after.rendered - before.rendered,
    compared: after.compared - before.compared,
    rebuilds: after.rebuilds - before.rebuilds,
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
  it('one more step costs the same counts at 5,000 steps as at 50, and its body equals a fresh full render and the whole-log rebuild', async () => {
    const small = await grown(50)
    const large = await grown(5_000)
    for (let k = 0; k < 70; k++) {
      // The bodies are compared on the first step, across a chunk boundary (steps of two messages fill a chunk every 32) and on the last.
      const checkBody = k === 0 || k === 35 || k === 69
      const s = await step(small, checkBody)
      const l = await step(large, checkBody)
      for (const cost of [s, l]) {
        expect(cost.applies).toBe(EVENTS_PER_STEP)
        expect(cost.rendered).toBe(2)
        expect(cost.rebuilds).toBe(0)
        expect(cost.compared).toBeLessThanOrEqual(CHUNK)
      }
    }
    // The kept list is the renderer's own, extended in place: one system message, the task, two messages a step.
    const body = large.renderer.render(await service.contextOf(large.session)).body.messages
    expect(body).toHaveLength(2 + 2 * large.next)
  })

  it('a Responses request continuing the previous response carries the same bytes at 5,000 steps as at 50', async () => {
    const small = await grown(50)
    const large = await grown(5_000)
    const bytes = { small: await responsesBytes(small), large: await responsesBytes(large) }
    expect(bytes.large).toBeLessThanOrEqual(2 * bytes.small)
  })
})
