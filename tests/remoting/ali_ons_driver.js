'use strict';
// Drives ali-ons (RocketMQ 4's remoting protocol, pure JavaScript) against OrbitMQ for tests/remoting:
//   node ali_ons_driver.js produce <namesrv> <topic> <count>         -> one JSON line per send result
//   node ali_ons_driver.js consume <namesrv> <topic> <group> <tags> <count> <timeoutMs> -> one JSON line per message
//   node ali_ons_driver.js produce-delayed <namesrv> <topic> <count> <delayLevel>
//   node ali_ons_driver.js produce-ordered <namesrv> <topic> <key,key,...> <perKey>  -> one queue per sharding key
//   node ali_ons_driver.js broadcast <namesrv> <topic> <group> <count> <timeoutMs> <instanceName>
const { Producer, Consumer, Message } = require('ali-ons');
const ConsumeFromWhere = require('ali-ons/lib/consumer/consume_from_where');

const [mode, nameSrv, topic, ...rest] = process.argv.slice(2);
// ali-ons always signs (RocketMQ 4's AclClientRPCHook layout); an ACL broker checks ALI_ONS_AK / ALI_ONS_SK
const accessKeyId = process.env.ALI_ONS_AK || 'orbitmq';
const accessKeySecret = process.env.ALI_ONS_SK || 'orbitmq';
const common = { httpclient: {}, nameSrv, accessKeyId, accessKeySecret, logger: quietLogger() };

function quietLogger() {
  const nop = () => {};
  const say = (...a) => console.error(...a);
  return process.env.ALI_ONS_VERBOSE ? { info: say, debug: nop, warn: say, error: say } : { info: nop, debug: nop, warn: say, error: say };
}

async function produce(count) {
  const producer = new Producer({ ...common, producerGroup: 'PID_ORBITMQ_TEST' });
  await producer.ready();
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, i % 2 === 0 ? 'TagA' : 'TagB', `ali-${i}`);
    msg.keys = [`key-${i}`];
    const result = await producer.send(msg);
    console.log(JSON.stringify({ status: result.sendStatus, msgId: result.msgId, queueId: result.messageQueue.queueId, offset: result.queueOffset }));
  }
  await producer.close();
}

async function produceWith(count, prepare) {
  const producer = new Producer({ ...common, producerGroup: 'PID_ORBITMQ_TEST' });
  await producer.ready();
  for (let i = 0; i < count; i++) {
    const msg = new Message(topic, 'TagA', `ali-${i}`);
    prepare(msg, i);
    const sentAt = Date.now();
    const result = await producer.send(msg);
    console.log(JSON.stringify({ status: result.sendStatus, msgId: result.msgId, queueId: result.messageQueue.queueId,
      offset: result.queueOffset, body: `ali-${i}`, sentAt }));
  }
  await producer.close();
}

async function consume(group, tags, count, timeoutMs, extra = {}) {
  const consumer = new Consumer({
    ...common, consumerGroup: group, consumeFromWhere: ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    brokerSuspendMaxTimeMillis: 2000, consumerTimeoutMillisWhenSuspend: 5000, rebalanceInterval: 1000, ...extra,
  });
  let seen = 0;
  const done = new Promise(resolve => {
    consumer.subscribe(topic, tags, async msg => {
      console.log(JSON.stringify({ body: msg.body.toString(), tags: msg.tags, keys: msg.keys, msgId: msg.msgId, topic: msg.topic,
        queueId: msg.queueId, queueOffset: msg.queueOffset, bornTimestamp: msg.bornTimestamp,
        storeTimestamp: msg.storeTimestamp, receivedAt: Date.now(), properties: msg.properties }));
      seen += 1;
      if (seen >= count) resolve();
    });
  });
  consumer.on('error', err => console.error(String(err)));
  await Promise.race([done, new Promise(resolve => setTimeout(resolve, timeoutMs))]);
  // the last handler resolved `done` before ali-ons moved its offset past that message: let it, then close
  await new Promise(resolve => setTimeout(resolve, 500));
  await consumer.close();
}

async function fail(group, timeoutMs) {
  // every delivery fails: ali-ons sends the message back (RocketMQ's retry), until its last attempt
  const consumer = new Consumer({
    ...common, consumerGroup: group, consumeFromWhere: ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
    brokerSuspendMaxTimeMillis: 1000, consumerTimeoutMillisWhenSuspend: 5000, rebalanceInterval: 1000,
    maxReconsumeTimes: 1,
  });
  consumer.subscribe(topic, '*', async msg => {
    console.log(JSON.stringify({ body: msg.body.toString(), reconsumeTimes: msg.reconsumeTimes, topic: msg.topic }));
    throw new Error('consumer failure on purpose');
  });
  consumer.on('error', () => {});
  await new Promise(resolve => setTimeout(resolve, timeoutMs));
  await consumer.close();
}

(async () => {
  if (mode === 'produce') await produce(Number(rest[0]));
  else if (mode === 'fail') await fail(rest[0], Number(rest[1]));
  else if (mode === 'consume') await consume(rest[0], rest[1], Number(rest[2]), Number(rest[3]));
  else if (mode === 'produce-delayed') await produceWith(Number(rest[0]), msg => { msg.delayTimeLevel = Number(rest[1]); });
  else if (mode === 'produce-ordered') {
    const keys = rest[0].split(',');
    await produceWith(keys.length * Number(rest[1]), (msg, i) => { msg.shardingKey = keys[i % keys.length]; });
  } else if (mode === 'broadcast') {
    // each instance keeps its own offsets (ali-ons' local file store under $HOME)
    await consume(rest[0], '*', Number(rest[1]), Number(rest[2]), { isBroadcast: true, persistent: true, instanceName: rest[3] });
  }
  else throw new Error(`unknown mode ${mode}`);
  process.exit(0);
})().catch(err => { console.error(err && err.stack || String(err)); process.exit(1); });
