import type { ContentBlock } from '@dsh/session'
import { prng } from '@dsh/test-kit'
import { describe, expect, it } from 'vitest'
import {
  anthropicRenderer,
  type ContextMessage,
  type ContextSummaryMark,
  chatRenderer,
  type PreviousResponse,
  type RenderStats,
  renderAnthropic,
  renderChat,
  renderResponses,
  responsesRenderer,
  type SessionContext,
} from '../../src/index.js'
import { attachments, contextOf, inlineImage, missingImage } from './fixture.js'

/**
 * A context built by random operations, as the fold and view would change
 * it: appends of user, assistant and tool messages, a late system message,
 * the open step growing, prunes, compactions, a reload (every message a new
 * object), and synthetic results rebuilt by every view. Each operation
 * reports the first message index it changed, so a renderer's work can be
 * bounded exactly.
 */
class Transcript {
  messages: ContextMessage[] = [{ role: 'system', seq: 0, blocks: [{ type: 'text', text: 'system prompt' }] }]
  compaction: ContextSummaryMark | null = null
  seq = 0
  private calls = 0
  private edits = 0
  /** Seq of the newest assistant message, and the seq its step ended at. */
  lastStep: { assistant: number; end: number } | null = null

  constructor(private readonly random: () => number) {}

  private pick(n: number): number {
    return Math.floor(this.random() * n)
  }

  /** The context as the view hands it over: synthetic results are new objects every time. */
  view(): SessionContext {
    const messages = this.messages.map((m) => (m.synthetic === true ? structuredClone(m) : m))
    return contextOf(messages, this.compaction)
  }

  user(): number {
    const at = this.messages.length
    const blocks: ContentBlock[] = [{ type: 'text', text: `question ${++this.seq}` }]
    if (this.random() < 0.3) blocks.push({ type: 'image', attachment: this.random() < 0.5 ? inlineImage : missingImage })
    this.messages.push({ role: 'user', seq: this.seq, blocks })
    return at
  }

  step(): number {
    const at = this.messages.length
    const assistantSeq = ++this.seq
    const ids: string[] = []
    const blocks: ContentBlock[] = []
    if (this.random() < 0.5) {
      blocks.push({
        type: 'reasoning',
        text: `thought ${assistantSeq}`,
        signature: `sig${assistantSeq}`,
        id: `rs_${assistantSeq}`,
      } as ContentBlock)
    }
    blocks.push({ type: 'text', text: `answer ${assistantSeq}` })
    for (let i = this.pick(3); i > 0; i--) {
      const id = `c${++this.calls}`
      ids.push(id)
      blocks.push({ type: 'tool-call', id, name: 'read', input: { path: id } })
    }
    this.messages.push({ role: 'assistant', seq: assistantSeq, blocks })
    const end = ++this.seq
    this.lastStep = { assistant: assistantSeq, end }
    for (const id of ids) {
      if (this.random() < 0.8) {
        this.messages.push({
          role: 'tool',
          seq: ++this.seq,
          blocks: [{ type: 'tool-result', callId: id, content: [{ type: 'text', text: `result of ${id}` }], isError: this.random() < 0.2 }],
        })
      } else {
        this.messages.push({
          role: 'tool',
          seq: assistantSeq,
          synthetic: true,
          blocks: [{ type: 'tool-result', callId: id, content: [{ type: 'text', text: 'Error TOOL_NO_RESULT' }], isError: true }],
        })
      }
    }
    return at
  }

  lateSystem(): number {
    const at = this.messages.length
    this.messages.push({ role: 'system', seq: ++this.seq, blocks: [{ type: 'text', text: `reminder ${this.seq}` }] })
    return at
  }

  /** The open step grows: the newest assistant message without calls is replaced by a longer one. */
  grow(): number {
    const last = this.messages.at(-1)
    if (last === undefined || last.role !== 'assistant' || last.blocks.some((b) => b.type === 'tool-call')) {
      const at = this.messages.length
      this.messages.push({ role: 'assistant', seq: ++this.seq, blocks: [{ type: 'text', text: 'streaming' }] })
      return at
    }
    const at = this.messages.length - 1
    this.messages[at] = { ...last, blocks: [...last.blocks, { type: 'text', text: ` more ${++this.edits}` }] }
    return at
  }

  prune(): number {
    const tools = this.messages.flatMap((m, i) => (m.role === 'tool' && m.synthetic !== true ? [i] : []))
    if (tools.length === 0) return this.messages.length
    const at = tools[this.pick(tools.length)] as number
    const message = this.messages[at] as ContextMessage
    const result = message.blocks[0] as ContentBlock & { type: 'tool-result' }
    this.messages[at] = { ...message, blocks: [{ ...result, content: [{ type: 'text', text: `[pruned ${++this.edits}]` }] }] }
    return at
  }

  compact(): number {
    if (this.messages.length < 4) return this.messages.length
    const to = 2 + this.pick(this.messages.length - 2)
    const first = this.messages[1] as ContextMessage
    const mark: ContextSummaryMark = { seq: ++this.seq, from: first.seq, to: this.seq }
    const summary: ContextMessage = {
      role: 'user',
      seq: first.seq,
      summary: mark,
      blocks: [{ type: 'text', text: `summary ${++this.edits}` }],
    }
    this.messages = [this.messages[0] as ContextMessage, summary, ...this.messages.slice(to)]
    this.compaction = mark
    return 1
  }

  /** The system prompt changes: everything renders again. */
  editSystem(): number {
    this.messages[0] = { role: 'system', seq: 0, blocks: [{ type: 'text', text: `system prompt ${++this.edits}` }] }
    return 0
  }

  reload(): number {
    this.messages = structuredClone(this.messages)
    return this.messages.length
  }
}

function renderedSince(before: RenderStats, after: RenderStats): number {
  return after.rendered - before.rendered
}

describe('incremental renderers', () => {
  for (const seed of [1, 2, 3]) {
    it(`equal a fresh full render after every one of 300 random appends, prunes, compactions, system edits and reloads, rendering only from the first changed message (seed ${seed})`, () => {
      const random = prng(seed)
      const t = new Transcript(random)
      const chat = chatRenderer({ attachments })
      const anthropic = anthropicRenderer({ attachments })
      const responses = responsesRenderer({ attachments })
      const chained = responsesRenderer({ attachments })
      for (const renderer of [chat, anthropic, responses]) renderer.render(t.view())
      let kinds = { compactions: 0, prunes: 0, systemEdits: 0, rebuilds: 0 }
      const chain = { continued: 0, unusable: 0 }
      for (let op = 0; op < 300; op++) {
        const r = random()
        const before = t.messages.length
        let first: number
        if (r < 0.25) first = t.user()
        else if (r < 0.6) first = t.step()
        else if (r < 0.65) first = t.lateSystem()
        else if (r < 0.78) first = t.grow()
        else if (r < 0.86) {
          first = t.prune()
          kinds = { ...kinds, prunes: kinds.prunes + (first < before ? 1 : 0) }
        } else if (r < 0.91) {
          first = t.compact()
          kinds = { ...kinds, compactions: kinds.compactions + (first < before ? 1 : 0) }
        } else if (r < 0.93) {
          first = t.editSystem()
          kinds = { ...kinds, systemEdits: kinds.systemEdits + 1 }
        } else first = t.reload()
        if (first < before) kinds = { ...kinds, rebuilds: kinds.rebuilds + 1 }
        const context = t.view()
        const expectedWork = context.messages.length - first

        const s1 = chat.stats
        expect(chat.render(context)).toEqual(renderChat(context, { attachments }))
        expect(renderedSince(s1, chat.stats)).toBe(expectedWork)

        const s2 = anthropic.stats
        expect(anthropic.render(context)).toEqual(renderAnthropic(context, { attachments }))
        expect(renderedSince(s2, anthropic.stats)).toBe(expectedWork)

        const s3 = responses.stats
        expect(responses.render(context)).toEqual(renderResponses(context, { attachments }))
        expect(renderedSince(s3, responses.stats)).toBe(expectedWork)

        if (t.lastStep !== null) {
          const previous: PreviousResponse = { id: `resp_${t.lastStep.assistant}`, throughSeq: t.lastStep.end }
          const rendered = chained.render(context, previous)
          expect(rendered).toEqual(renderResponses(context, { attachments, previousResponse: previous }))
          if (rendered.body.previous_response_id === undefined) chain.unusable++
          else chain.continued++
        }
      }
      // the sequence exercised what it claims to
      expect(kinds.compactions).toBeGreaterThan(3)
      expect(kinds.prunes).toBeGreaterThan(3)
      expect(kinds.systemEdits).toBeGreaterThan(0)
      expect(chat.stats.rebuilds).toBe(kinds.rebuilds)
      expect(chain.continued).toBeGreaterThan(100)
      expect(chain.unusable).toBeGreaterThan(0)
      expect(anthropic.render(t.view()).warnings['system-as-user']).toBeGreaterThan(0)
    })
  }

  it('a reload (every message a new, equal object) and rebuilt synthetic results render nothing again', () => {
    const t = new Transcript(prng(7))
    for (let i = 0; i < 40; i++) t.step()
    const chat = chatRenderer()
    chat.render(t.view())
    const rendered = chat.stats.rendered
    t.reload()
    chat.render(t.view())
    chat.render(t.view())
    expect(chat.stats.rendered).toBe(rendered)
    expect(chat.stats.reused).toBe(2 * t.messages.length)
  })
})
