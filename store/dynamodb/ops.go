package dynamodb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// The conditions of the writes. :now is the Store's clock: a record whose
// deadline (#e, written with the skew allowance in it) is at or before it
// is over.
const (
	// Claim writes when the key is absent, its record is over (a lapsed
	// lease or a retention that ended), or the caller's own token holds it
	// in progress with the same fingerprint (a renewal).
	claimCond      = "attribute_not_exists(#k) OR #e <= :now OR (#s = :inprog AND #t = :tok AND #f = :fp)"
	claimCondNoFP  = "attribute_not_exists(#k) OR #e <= :now OR (#s = :inprog AND #t = :tok AND attribute_not_exists(#f))"
	holderCond     = "#s = :inprog AND #t = :tok"
	completeUpdate = "SET #s = :done, #e = :e, #ttl = :ttl, #r = :r REMOVE #l"
	completeNoResp = "SET #s = :done, #e = :e, #ttl = :ttl REMOVE #l"
)

var (
	inProgressValue = attrN(statusInProgress)
	completedValue  = attrN(statusCompleted)
)

// Claim implements store.Store: one conditional PutItem, which writes the
// claim when the key is free or already the caller's. When the condition
// fails, the item DynamoDB returns with the refusal
// (ReturnValuesOnConditionCheckFailure), or one strongly consistent GetItem
// where the server returns none, says what holds the key.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, token store.Token, lease time.Duration) (store.Claim, error) {
	if err := store.CheckClaim(key, fingerprint, token, lease); err != nil {
		return store.Claim{}, fmt.Errorf("dynamodb: claim: %w", err)
	}
	for range maxAttempts {
		now := s.now()
		until := s.deadline(now, lease)
		item := map[string]types.AttributeValue{
			attrKey:         attrS(key),
			attrToken:       attrS(string(token)),
			attrStatus:      inProgressValue,
			attrLockedUntil: attrTime(until),
			attrExpiresAt:   attrTime(until),
			attrTTL:         s.ttlOf(until),
		}
		values := map[string]types.AttributeValue{
			":now": attrTime(now), ":inprog": inProgressValue, ":tok": attrS(string(token)),
		}
		cond, condNames := claimCondNoFP, namesFor("#k", "#e", "#s", "#t", "#f")
		if fingerprint != "" {
			item[attrFingerprint] = attrS(fingerprint)
			values[":fp"] = attrS(fingerprint)
			cond = claimCond
		}
		in := &dynamodb.PutItemInput{
			TableName: s.table, Item: item, ConditionExpression: &cond,
			ExpressionAttributeNames: condNames, ExpressionAttributeValues: values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		err := s.retry(ctx, func(ctx context.Context) error {
			_, err := s.client.PutItem(ctx, in)
			return err
		})
		if err == nil {
			return store.Claim{Outcome: store.Acquired, Record: store.Record{
				Key: key, Fingerprint: fingerprint, Status: store.StatusInProgress, Token: token,
				LockedUntil: until, ExpiresAt: until,
			}}, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return store.Claim{}, fmt.Errorf("dynamodb: claim: %w", err)
		}
		r, found, err := s.explain(ctx, key, ccf.Item)
		if err != nil {
			return store.Claim{}, fmt.Errorf("dynamodb: claim: %w", err)
		}
		if !found || !s.live(r, s.now()) {
			continue // released or over since the write was refused: try again
		}
		switch {
		case r.Fingerprint != fingerprint:
			return store.Claim{Outcome: store.Mismatch, Record: r}, nil
		case r.Status == store.StatusCompleted:
			return store.Claim{Outcome: store.Completed, Record: r}, nil
		case r.Token != token:
			return store.Claim{Outcome: store.InProgress, Record: r}, nil
		}
		// Our own claim, which the condition refused a moment ago: it was
		// written (by a lost reply's first attempt) after the refusal.
		// Writing again renews it.
	}
	return store.Claim{}, fmt.Errorf("dynamodb: claim: key %q changed %d times while being claimed", key, maxAttempts)
}

// explain returns the record a refused write ran into: the item DynamoDB
// returned with the refusal or, when the server returned none, the item a
// strongly consistent read finds now.
func (s *Store) explain(ctx context.Context, key string, item map[string]types.AttributeValue) (store.Record, bool, error) {
	if len(item) == 0 {
		var err error
		if item, err = s.getItem(ctx, key); err != nil {
			return store.Record{}, false, err
		}
	}
	return decode(item)
}

func (s *Store) getItem(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	in := &dynamodb.GetItemInput{TableName: s.table, Key: keyOf(key), ConsistentRead: &consistent}
	var out *dynamodb.GetItemOutput
	err := s.retry(ctx, func(ctx context.Context) error {
		var err error
		out, err = s.client.GetItem(ctx, in)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

var consistent = true

// Complete implements store.Store: one UpdateItem conditional on token
// holding the key in progress. A refusal is explained as Claim's is: a
// record completed by token is a retried Complete (nil); anything else is
// store.ErrLeaseLost (so is a record completed by token whose retention
// is over: the key is absent). A response longer than MaxResponseLen is
// store.ErrInvalid, before anything is written.
func (s *Store) Complete(ctx context.Context, key string, token store.Token, response []byte, retention time.Duration) error {
	if err := store.CheckComplete(key, token, retention); err != nil {
		return fmt.Errorf("dynamodb: complete: %w", err)
	}
	if len(response) > MaxResponseLen {
		return fmt.Errorf("dynamodb: complete: %w: response is %d bytes, longer than %d (DynamoDB items stop at 400 KB)",
			store.ErrInvalid, len(response), MaxResponseLen)
	}
	expires := s.deadline(s.now(), retention)
	update := completeNoResp
	values := map[string]types.AttributeValue{
		":inprog": inProgressValue, ":tok": attrS(string(token)), ":done": completedValue,
		":e": attrTime(expires), ":ttl": s.ttlOf(expires),
	}
	names := namesFor("#s", "#t", "#e", "#ttl", "#l")
	if len(response) > 0 {
		update = completeUpdate
		values[":r"] = attrB(response)
		names["#r"] = attrResponse
	}
	cond := holderCond
	in := &dynamodb.UpdateItemInput{
		TableName: s.table, Key: keyOf(key), UpdateExpression: &update, ConditionExpression: &cond,
		ExpressionAttributeNames: names, ExpressionAttributeValues: values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.UpdateItem(ctx, in)
		return err
	})
	var ccf *types.ConditionalCheckFailedException
	if err == nil || !errors.As(err, &ccf) {
		return wrap("complete", err)
	}
	r, found, err := s.explain(ctx, key, ccf.Item)
	if err != nil {
		return fmt.Errorf("dynamodb: complete: %w", err)
	}
	if found && r.Status == store.StatusCompleted && r.Token == token && s.live(r, s.now()) {
		return nil // a retried Complete: the first response stays
	}
	return fmt.Errorf("dynamodb: complete: key %q: %w", key, store.ErrLeaseLost)
}

// Release implements store.Store: one DeleteItem conditional on token
// holding the key in progress; a refusal changes nothing and is not an
// error.
func (s *Store) Release(ctx context.Context, key string, token store.Token) error {
	if err := store.CheckRelease(key, token); err != nil {
		return fmt.Errorf("dynamodb: release: %w", err)
	}
	cond := holderCond
	in := &dynamodb.DeleteItemInput{
		TableName: s.table, Key: keyOf(key), ConditionExpression: &cond,
		ExpressionAttributeNames:  namesFor("#s", "#t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":inprog": inProgressValue, ":tok": attrS(string(token))},
	}
	err := s.retry(ctx, func(ctx context.Context) error {
		_, err := s.client.DeleteItem(ctx, in)
		return err
	})
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return nil
	}
	return wrap("release", err)
}

// Get implements store.Store with one strongly consistent GetItem.
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := store.CheckKey(key); err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	item, err := s.getItem(ctx, key)
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	r, found, err := decode(item)
	if err != nil {
		return store.Record{}, fmt.Errorf("dynamodb: get: %w", err)
	}
	if !found || !s.live(r, s.now()) {
		return store.Record{}, fmt.Errorf("dynamodb: get: key %q: %w", key, store.ErrNotFound)
	}
	return r, nil
}

func wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("dynamodb: %s: %w", op, err)
}
