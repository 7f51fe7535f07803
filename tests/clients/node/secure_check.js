#!/usr/bin/env node
// Checks a broker's SASL_SSL listener with kafkajs 2.2.4: TLS verified against the given CA, then
// SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512. In the normal mode it creates the topic
// (1 partition; an existing topic is fine), produces --count records with acks=all whose values
// are "<topic>-<i>", reads them back from the beginning through a fresh consumer group (kafkajs
// has no assign()) and checks they come back exactly and in order. With --expect-auth-failure
// it only tries to connect and produce with the given (wrong) credentials and passes if kafkajs
// reports a SASL authentication failure. It prints one line per step, then PASS (exit 0) or
// FAIL: <why> (exit 1); usage errors exit 2. Everything is bounded: 60 s in the normal mode,
// 30 s with --expect-auth-failure or --expect-denied.
//
// With --expect-denied (tests/integration/acl_test.py) the user is authenticated but the broker's
// ACLs deny it: producing one record to --topic must fail with TOPIC_AUTHORIZATION_FAILED, and a
// consumer in --group subscribed to --group-topic (a topic the user may read) must crash with
// GROUP_AUTHORIZATION_FAILED. --mechanism NONE talks to an SSL listener (TLS without SASL), with
// --cert/--key a client certificate (mutual TLS). --plaintext talks to a SASL_PLAINTEXT listener (no TLS, no --ca)
// in any mode.
//
//   node secure_check.js --bootstrap HOST:PORT --ca CA.pem
//        --mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN --user U --password P --topic T
//        [--count N] [--expect-auth-failure]
//   node secure_check.js --bootstrap HOST:PORT --plaintext --mechanism PLAIN --user U
//        --password P --topic T --expect-denied --group G --group-topic T2
'use strict'

process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1'

const crypto = require('crypto')
const fs = require('fs')
const { Kafka, logLevel } = require('kafkajs')

const NAME = 'secure_check'
const RUN_LIMIT_MS = 60000
const AUTH_LIMIT_MS = 30000
const MECHANISMS = { 'SCRAM-SHA-512': 'scram-sha-512', 'SCRAM-SHA-256': 'scram-sha-256', PLAIN: 'plain' }

class CheckError extends Error {}
const fail = (msg) => {
  throw new CheckError(msg)
}

function usage(msg) {
  console.error(`${NAME}: ${msg}\nusage: secure_check.js --bootstrap HOST:PORT --ca CA.pem ` +
    '--mechanism SCRAM-SHA-512|SCRAM-SHA-256|PLAIN --user U --password P --topic T [--count N] ' +
    '[--expect-auth-failure] [--plaintext] [--expect-denied --group G --group-topic T2]')
  process.exit(2)
}

function parseArgs(argv) {
  const a = { count: 20, expectAuthFailure: false, password: '', plaintext: false, expectDenied: false }
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i]
    const v = () => {
      if (i + 1 >= argv.length) usage(`${k} needs a value`)
      return argv[++i]
    }
    if (k === '--bootstrap') a.bootstrap = v()
    else if (k === '--ca') a.ca = v()
    else if (k === '--mechanism') a.mechanism = v().toUpperCase()
    else if (k === '--user') a.user = v()
    else if (k === '--password') a.password = v()
    else if (k === '--topic') a.topic = v()
    else if (k === '--count') a.count = Number(v())
    else if (k === '--expect-auth-failure') a.expectAuthFailure = true
    else if (k === '--plaintext') a.plaintext = true
    else if (k === '--cert') a.cert = v()
    else if (k === '--key') a.key = v()
    else if (k === '--expect-denied') a.expectDenied = true
    else if (k === '--group') a.group = v()
    else if (k === '--group-topic') a.groupTopic = v()
    else usage(`unknown argument ${k}`)
  }
  if (!a.bootstrap || (!a.ca && !a.plaintext) || !a.mechanism ||
      (!a.user && a.mechanism !== 'NONE') || !a.topic) {
    usage('--bootstrap, --ca (unless --plaintext), --mechanism, --user and --topic are required')
  }
  if (a.expectDenied && (!a.group || !a.groupTopic)) usage('--expect-denied needs --group and --group-topic')
  if (a.expectDenied && a.expectAuthFailure) usage('--expect-denied and --expect-auth-failure exclude each other')
  if (a.mechanism !== 'NONE' && !(a.mechanism in MECHANISMS)) usage(`unknown --mechanism ${a.mechanism}`)
  if (!Number.isInteger(a.count) || a.count < 1) usage('--count must be a positive integer')
  return a
}

const t0 = Date.now()
const step = (msg) => console.log(`[${NAME} ${((Date.now() - t0) / 1000).toFixed(2).padStart(6)}s] ${msg}`)

// Rejects after ms so that no single call can eat the whole budget.
function within(ms, what, promise) {
  let timer
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new CheckError(`${what}: no answer within ${ms / 1000}s`)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

// Errors kafkajs met and logged at debug level (with --expect-denied): kafkajs 2.2.4 swallows a
// FindCoordinator error such as GROUP_AUTHORIZATION_FAILED and throws
// KafkaJSGroupCoordinatorNotFound instead; its debug log keeps the broker's error.
const loggedErrorTypes = []
const logCreator = () => ({ log }) => {
  const t = log && log.error && errorType(log.error)
  if (t) loggedErrorTypes.push(t)
}

function kafka(a) {
  let ca
  if (!a.plaintext) {
    try {
      ca = fs.readFileSync(a.ca)
    } catch (e) {
      fail(`read --ca: ${e.message}`)
    }
  }
  // kafkajs passes ssl to tls.connect and sets no servername for an IP address; Node then checks
  // the certificate against the host (127.0.0.1 in the tests: the broker certificate carries
  // IP:127.0.0.1 and DNS:localhost).
  return new Kafka({
    clientId: 'samsa-securecheck-kafkajs',
    brokers: [a.bootstrap],
    ssl: a.plaintext ? false : {
      ca: [ca], rejectUnauthorized: true,
      ...(a.cert ? { cert: fs.readFileSync(a.cert), key: fs.readFileSync(a.key) } : {}),
    },
    ...(a.mechanism === 'NONE' ? {} :
      { sasl: { mechanism: MECHANISMS[a.mechanism], username: a.user, password: a.password } }),
    connectionTimeout: 5000,
    authenticationTimeout: 10000,
    requestTimeout: 15000,
    retry: { retries: 3, initialRetryTime: 200, maxRetryTime: 2000 },
    logLevel: a.expectDenied ? logLevel.DEBUG : logLevel.NOTHING,
    ...(a.expectDenied ? { logCreator } : {}),
  })
}

const isAuthError = (e) => e && (e.name === 'KafkaJSSASLAuthenticationError' ||
  (e.cause && isAuthError(e.cause)) || (e.originalError && isAuthError(e.originalError)))

async function expectAuthFailure(a) {
  const producer = kafka(a).producer({ allowAutoTopicCreation: true })
  step(`connecting to ${a.bootstrap} over ${protocol(a)} as "${a.user}" with ${a.mechanism} ` +
    '(expecting an authentication failure)')
  try {
    await within(AUTH_LIMIT_MS - 5000, 'connect', producer.connect())
    step(`connected; producing one record to ${a.topic}`)
    await within(AUTH_LIMIT_MS - 10000, 'produce', producer.send({
      topic: a.topic, acks: -1, messages: [{ value: `${a.topic}-auth` }],
    }))
  } catch (e) {
    if (isAuthError(e)) {
      step(`authentication refused: ${e.message}`)
      return
    }
    fail(`expected a SASL authentication failure, got: ${e && e.name}: ${e && e.message}`)
  } finally {
    await producer.disconnect().catch(() => {})
  }
  fail(`the broker accepted "${a.user}" with ${a.mechanism}: connected and produced`)
}

// The Kafka error type (kafkajs's name for the code, e.g. TOPIC_AUTHORIZATION_FAILED) of an error
// or of one it wraps, else null.
function errorType(e, depth = 0) {
  if (!e || depth > 5) return null
  if (e.type && e.type !== 'UNKNOWN') return e.type
  for (const inner of [e.cause, e.originalError, ...(Array.isArray(e.errors) ? e.errors : [])]) {
    const t = errorType(inner, depth + 1)
    if (t) return t
  }
  return null
}

const protocol = (a) => (a.plaintext ? 'SASL_PLAINTEXT'
  : a.mechanism === 'NONE' ? (a.cert ? 'SSL with a client certificate' : 'SSL') : 'SASL_SSL')

// Authenticated, but the ACLs let the user neither write --topic nor use --group.
async function expectDenied(a) {
  const k = kafka(a)
  step(`connecting to ${a.bootstrap} over ${protocol(a)} as "${a.user}" with ${a.mechanism} ` +
    '(expecting ACL denials)')
  const producer = k.producer({ allowAutoTopicCreation: false, retry: { retries: 1 } })
  try {
    await within(10000, 'producer connect', producer.connect())
    await within(15000, 'produce', producer.send({
      topic: a.topic, acks: -1, messages: [{ value: `${a.topic}-denied` }],
    }))
    fail(`produced to ${a.topic}: the broker did not deny WRITE`)
  } catch (e) {
    if (e instanceof CheckError) throw e
    const t = errorType(e)
    if (t !== 'TOPIC_AUTHORIZATION_FAILED') {
      fail(`produce to ${a.topic}: expected TOPIC_AUTHORIZATION_FAILED, got ${t}: ${e && e.name}: ${e && e.message}`)
    }
    step(`produce to ${a.topic} refused: ${t}: ${e.message}`)
  } finally {
    await producer.disconnect().catch(() => {})
  }

  const consumer = k.consumer({ groupId: a.group, maxWaitTimeInMs: 500, sessionTimeout: 10000,
    rebalanceTimeout: 10000, heartbeatInterval: 1000, retry: { retries: 1 } })
  let crashed
  const crash = new Promise((resolve) => {
    crashed = resolve
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => crashed(payload.error))
  try {
    step(`consuming ${a.groupTopic} in group ${a.group}`)
    let err = null
    try {
      await within(10000, 'consumer connect', consumer.connect())
      await within(10000, 'subscribe', consumer.subscribe({ topics: [a.groupTopic], fromBeginning: true }))
      await within(10000, 'run', consumer.run({ eachMessage: async () => {} }))
      err = await within(20000, 'GROUP_AUTHORIZATION_FAILED', crash)
    } catch (e) {
      if (e instanceof CheckError) throw e
      err = e
    }
    let t = errorType(err)
    if (t === null && err && err.name === 'KafkaJSGroupCoordinatorNotFound' &&
        loggedErrorTypes.includes('GROUP_AUTHORIZATION_FAILED')) {
      t = 'GROUP_AUTHORIZATION_FAILED'
      step('kafkajs reports KafkaJSGroupCoordinatorNotFound; its FindCoordinator answer was ' +
        'GROUP_AUTHORIZATION_FAILED (debug log)')
    }
    if (t !== 'GROUP_AUTHORIZATION_FAILED') {
      fail(`consume in group ${a.group}: expected GROUP_AUTHORIZATION_FAILED, got ${t}: ` +
        `${err && err.name}: ${err && err.message} (errors logged: ${[...new Set(loggedErrorTypes)]})`)
    }
    step(`group ${a.group} refused: ${t}: ${err.message}`)
  } finally {
    await within(5000, 'consumer disconnect', consumer.disconnect()).catch(() => {})
  }
}

async function normal(a) {
  const k = kafka(a)
  const admin = k.admin()
  step(`connecting to ${a.bootstrap} over ${protocol(a)} as "${a.user}" with ${a.mechanism}`)
  await within(15000, 'connect', admin.connect())
  step('connected and authenticated')
  const created = await within(15000, `create topic ${a.topic}`, admin.createTopics({
    topics: [{ topic: a.topic, numPartitions: 1, replicationFactor: -1 }],
    waitForLeaders: true,
    timeout: 10000,
  }))
  step(created ? `created topic ${a.topic} (1 partition)` : `topic ${a.topic} already exists`)
  await admin.disconnect()

  const producer = k.producer({ allowAutoTopicCreation: true, idempotent: false })
  await within(15000, 'producer connect', producer.connect())
  const messages = []
  for (let i = 0; i < a.count; i++) messages.push({ value: `${a.topic}-${i}`, partition: 0 })
  const res = await within(15000, 'produce', producer.send({ topic: a.topic, acks: -1, messages }))
  await producer.disconnect()
  const r = res.find((x) => x.topicName === a.topic && x.partition === 0)
  if (!r || r.errorCode !== 0) fail(`produce: unexpected answer ${JSON.stringify(res)}`)
  const first = Number(r.baseOffset)
  step(`produced ${a.count} records with acks=all at offsets ${first}..${first + a.count - 1}`)

  const groupId = `securecheck-${a.topic}-${crypto.randomBytes(6).toString('hex')}`
  const consumer = k.consumer({ groupId, maxWaitTimeInMs: 500, sessionTimeout: 10000,
    rebalanceTimeout: 10000, heartbeatInterval: 1000 })
  const got = []
  let skipped = 0
  let done
  const allBack = new Promise((resolve) => {
    done = resolve
  })
  try {
    await within(15000, 'consumer connect', consumer.connect())
    await consumer.subscribe({ topics: [a.topic], fromBeginning: true })
    step(`consuming ${a.topic} from the beginning in the fresh group ${groupId}`)
    await consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        const off = Number(message.offset)
        if (off < first) {
          skipped++ // records from before this run (the topic already existed)
          return
        }
        if (got.length < a.count) got.push({ partition, offset: off, key: message.key, value: message.value })
        if (got.length >= a.count) done()
      },
    })
    await within(25000, `consume ${a.count} records`, allBack).catch((e) => {
      fail(`${e.message}: ${got.length} of ${a.count} records back`)
    })
  } finally {
    await within(5000, 'consumer disconnect', consumer.disconnect()).catch(() => {})
  }
  if (skipped > 0) step(`skipped ${skipped} records from before offset ${first} (written before this run)`)
  got.forEach((g, i) => {
    const want = `${a.topic}-${i}`
    if (g.partition !== 0) fail(`record ${i}: from partition ${g.partition}`)
    if (g.offset !== first + i) fail(`record ${i}: offset ${g.offset}, expected ${first + i}`)
    if (g.key !== null) fail(`record ${i} (offset ${g.offset}): key ${g.key}, produced a null key`)
    if (g.value === null || g.value.toString() !== want) {
      fail(`record ${i} (offset ${g.offset}): value ${g.value}, expected ${want}`)
    }
  })
  step(`consumed ${got.length} records back, exact and in order`)
}

const args = parseArgs(process.argv)
const limit = args.expectAuthFailure || args.expectDenied ? AUTH_LIMIT_MS : RUN_LIMIT_MS
setTimeout(() => {
  console.log(`FAIL: hard timeout of ${limit / 1000}s reached`)
  process.exit(1)
}, limit)
;(args.expectAuthFailure ? expectAuthFailure(args) : args.expectDenied ? expectDenied(args) : normal(args)).then(() => {
  step('PASS')
  process.exit(0)
}, (e) => {
  if (e instanceof CheckError) console.log(`FAIL: ${e.message}`)
  else console.log(`FAIL: ${e && e.name ? `${e.name}: ${e.message}` : e}`)
  process.exit(1)
})
