#!/usr/bin/env node
import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'

// Interim entry point until the full CLI lands: shows the session model.
const ctx = new Context()
const sessions = new SessionStore(ctx)
const parent = sessions.create()
parent.append('turn/start', { turn: 1 })
parent.append('assistant/message', { turn: 1, text: 'hello' })
parent.append('turn/end', { turn: 1, reason: 'completed' })
const child = sessions.fork(parent)
child.append('user/message', { text: 'a child question' })
console.log(`parent ${parent.id}: ${parent.seq} events`)
console.log(`child  ${child.id}: ${child.seq} events, ${child.inheritedEventCount} inherited, own: ${child.ownEvents().map((e) => e.type).join(', ')}`)
