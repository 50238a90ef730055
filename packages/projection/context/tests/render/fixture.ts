import type { AttachmentRef, ContentBlock } from '@dsh/session'
import {
  type AttachmentResolver,
  type ContextBlock,
  type ContextMessage,
  type ContextSummaryMark,
  type ContextWarnings,
  FOLD_WARNINGS,
  type SessionContext,
  VIEW_WARNINGS,
} from '../../src/index.js'

/** A 1x1 PNG, inline in its reference (below the inline threshold). */
export const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
const PDF_BYTES = Buffer.from('%PDF-1.4\n1 0 obj <<>> endobj\ntrailer <<>>\n%%EOF\n').toString('base64')

const digest = (c: string): string => c.repeat(64)

export const inlineImage: AttachmentRef = { digest: digest('a'), mediaType: 'image/png', size: 68, data: PNG_1X1 }
export const storedPdf: AttachmentRef = { digest: digest('b'), mediaType: 'application/pdf', size: 52, name: 'report.pdf' }
export const missingImage: AttachmentRef = { digest: digest('c'), mediaType: 'image/jpeg', size: 90_000, name: 'photo.jpg' }

/** Attachments stored beside the session, by digest (the missing image is not among them). */
export const stored: ReadonlyMap<string, string> = new Map([[storedPdf.digest, PDF_BYTES]])
export const attachments: AttachmentResolver = (ref) => {
  const base64 = stored.get(ref.digest)
  return base64 === undefined ? undefined : { base64 }
}

export function noContextWarnings(): ContextWarnings {
  const out: Record<string, number> = {}
  for (const w of [...FOLD_WARNINGS, ...VIEW_WARNINGS]) out[w] = 0
  return out as ContextWarnings
}

export function contextOf(messages: readonly ContextMessage[], compaction: ContextSummaryMark | null = null): SessionContext {
  const last = messages.at(-1)
  return {
    messages,
    step: null,
    provider: 'test',
    model: 'test-model',
    compaction,
    compacting: false,
    seq: last === undefined ? -1 : last.seq,
    warnings: noContextWarnings(),
  }
}

/** A reasoning block as a Responses driver records it: the item id beside the signature. */
const signedReasoning = { type: 'reasoning', text: 'The user wants both files read.', signature: 'sig-abc', id: 'rs_1' } as ContentBlock
const unknownBlock: ContextBlock = { type: 'x-custom', payload: 1 }

export const SUMMARY: ContextSummaryMark = { seq: 20, from: 1, to: 20, provider: 'test', model: 'test-model' }

/**
 * A context that holds every case the golden files pin: a system prompt, a
 * compacted range (summary), an inline image, a stored PDF, a missing image,
 * an unknown block, signed and unsigned reasoning, a tool result with an
 * image, a tool error and a dangling call answered by a synthetic result.
 */
export const fixtureMessages: readonly ContextMessage[] = [
  { role: 'system', seq: 0, blocks: [{ type: 'text', text: 'You are a careful assistant.' }] },
  {
    role: 'user',
    seq: 1,
    summary: SUMMARY,
    blocks: [{ type: 'text', text: 'Summary of the conversation so far: the user asked for a file review.' }],
  },
  {
    role: 'user',
    seq: 21,
    blocks: [
      { type: 'text', text: 'What is in this picture and this report?' },
      { type: 'image', attachment: inlineImage },
      { type: 'file', attachment: storedPdf },
      { type: 'image', attachment: missingImage },
      unknownBlock,
    ],
  },
  {
    role: 'assistant',
    seq: 23,
    provider: 'test',
    model: 'test-model',
    blocks: [
      signedReasoning,
      { type: 'text', text: 'Let me look at the files.' },
      { type: 'tool-call', id: 'c1', name: 'read', input: { path: 'a.txt' } },
      { type: 'tool-call', id: 'c2', name: 'run', input: { cmd: 'false' }, arguments: '{"cmd": "false"}' },
      { type: 'tool-call', id: 'c3', name: 'fetch', input: { url: 'https://example.test/' } },
    ],
  },
  {
    role: 'tool',
    seq: 24,
    blocks: [
      {
        type: 'tool-result',
        callId: 'c1',
        content: [
          { type: 'text', text: 'hello' },
          { type: 'image', attachment: inlineImage },
        ],
      },
    ],
  },
  {
    role: 'tool',
    seq: 25,
    blocks: [{ type: 'tool-result', callId: 'c2', content: [{ type: 'text', text: 'exit status 1' }], isError: true }],
  },
  {
    role: 'tool',
    seq: 23,
    synthetic: true,
    blocks: [
      {
        type: 'tool-result',
        callId: 'c3',
        content: [{ type: 'text', text: 'Error TOOL_NO_RESULT: the turn ended before this tool returned; its effect is unknown.' }],
        isError: true,
      },
    ],
  },
  { role: 'user', seq: 27, blocks: [{ type: 'text', text: 'Thanks. Now summarize.' }] },
  {
    role: 'assistant',
    seq: 29,
    blocks: [
      { type: 'reasoning', text: 'An unsigned thought.' },
      { type: 'text', text: 'The picture is one pixel; the report is empty.' },
    ],
  },
]

export const fixtureContext: SessionContext = contextOf(fixtureMessages, SUMMARY)
