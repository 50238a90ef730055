import { expect, it, vi } from 'vitest'
import { previousResponseOf } from '../src/chain.js'
import { newStore } from './helpers.js'

const target = { provider: 'openai', model: 'test-model' }

it('finds the response to continue by walking back from the end: it reads the events since the newest step, never a copy of the log', () => {
  const session = newStore().create()
  session.append('turn/start', { turn: 1 })
  for (let i = 0; i < 2000; i++) session.append('user/message', { text: `note ${i}` })
  session.append('step/start', { api: 'responses', ...target })
  session.append('assistant/message', { turn: 1, text: 'done' })
  const end = session.append('step/end', { responseId: 'resp_1', finish: 'stop' })
  const snapshot = vi.spyOn(session, 'events', 'get')
  const own = vi.spyOn(session, 'ownEvents')
  const at = vi.spyOn(session, 'eventAt')
  expect(previousResponseOf(session, target)).toEqual({ id: 'resp_1', throughSeq: end.seq })
  expect(snapshot).not.toHaveBeenCalled()
  expect(own).not.toHaveBeenCalled()
  // step/end, the message, step/start.
  expect(at).toHaveBeenCalledTimes(3)
  // Another model on the newest step starts a new chain.
  expect(previousResponseOf(session, { provider: 'openai', model: 'other' })).toBeUndefined()
})
